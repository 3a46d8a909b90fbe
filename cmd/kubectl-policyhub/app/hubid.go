package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// readHubID reads the hub's id where the hub published it: the ConfigMap policyhubv1.HubInfoName
// in the hub's own namespace, and nowhere else. Whoever may write a ConfigMap in some other
// namespace must not choose the id the CLI plans with (with another hub's id, the hub's own
// objects look foreign and a dry-run shows them as conflicts). It returns "" when the hub
// published none there.
func readHubID(ctx context.Context, c client.Reader, hubNamespace string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: hubNamespace, Name: policyhubv1.HubInfoName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the hub's id (ConfigMap %s/%s; --hub-namespace names the hub's namespace, --hub-id the id): %w",
			hubNamespace, policyhubv1.HubInfoName, err)
	}
	return cm.Data[policyhubv1.HubInfoIDKey], nil
}

// resolveHubID sets the hub's id, unless --hub-id gave it: the id the hub published in its
// namespace, else policyhub-hub's default.
func (o *options) resolveHubID(ctx context.Context, hub client.Reader) error {
	if o.hubID != "" {
		return nil
	}
	id, err := readHubID(ctx, hub, o.hubNamespace)
	if err != nil {
		return err
	}
	if id == "" {
		id = policyhubv1.DefaultHubID
	}
	o.hubID = id
	return nil
}
