package source

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A registry's credentials from a Secret as `kubectl create secret docker-registry` makes it:
// the artifact is read with them; another registry's credentials, or another kind of Secret, read
// nothing.
func TestRegistryKeychainFromADockerConfigSecret(t *testing.T) {
	host := testRegistry(t)
	ctx := context.Background()
	push(t, host, "policies/baseline:v1", KyvernoConfigMediaType, clusterPolicy("require-labels"))
	secret := func(registry, password string) *corev1.Secret {
		auth := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + password))
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "policyhub-system", Name: "registry"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil,
				`{"auths":{%q:{"username":%q,"password":%q,"auth":%q}}}`, registry, testUser, password, auth)},
		}
	}

	kc, err := RegistryKeychain(ctx, secret(host, testPassword))
	if err != nil {
		t.Fatal(err)
	}
	if art, err := PullOCI(ctx, host+"/policies/baseline:v1", kc, DefaultLimits); err != nil || len(art.Policies) != 1 {
		t.Fatalf("with the Secret's credentials: %v", err)
	}
	other, err := RegistryKeychain(ctx, secret("registry.example.com", testPassword))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PullOCI(ctx, host+"/policies/baseline:v1", other, DefaultLimits); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with another registry's credentials: %v, want a 401", err)
	}

	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		want   string
	}{
		{"an Opaque Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Type: corev1.SecretTypeOpaque}, `is of type "Opaque"`},
		{"without its key", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Type: corev1.SecretTypeDockerConfigJson}, "has no .dockerconfigjson"},
		{"not a Docker config", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("user:password")}}, "is not a Docker config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RegistryKeychain(ctx, tc.secret); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
