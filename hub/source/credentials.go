package source

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	k8sauthn "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
)

// RegistryKeychain is the credentials a registry Secret holds, read as kubelet reads an image
// pull secret (kubernetes.io/dockerconfigjson, as `kubectl create secret docker-registry` makes
// it, or the older kubernetes.io/dockercfg): each registry its own, matched by host. A Secret of
// another type, without its key, or whose content is not a Docker config is an error naming it.
func RegistryKeychain(ctx context.Context, secret *corev1.Secret) (authn.Keychain, error) {
	var key string
	switch secret.Type {
	case corev1.SecretTypeDockerConfigJson:
		key = corev1.DockerConfigJsonKey
	case corev1.SecretTypeDockercfg:
		key = corev1.DockerConfigKey
	default:
		return nil, fmt.Errorf("registry Secret %s/%s is of type %q: registry credentials are a %s Secret (kubectl create secret docker-registry)",
			secret.Namespace, secret.Name, secret.Type, corev1.SecretTypeDockerConfigJson)
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, fmt.Errorf("registry Secret %s/%s has no %s", secret.Namespace, secret.Name, key)
	}
	var config map[string]json.RawMessage
	if err := json.Unmarshal(data, &config); err != nil {
		return nil, fmt.Errorf("registry Secret %s/%s: %s is not a Docker config: %w", secret.Namespace, secret.Name, key, err)
	}
	keychain, err := k8sauthn.NewFromPullSecrets(ctx, []corev1.Secret{*secret})
	if err != nil {
		return nil, fmt.Errorf("registry Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return keychain, nil
}
