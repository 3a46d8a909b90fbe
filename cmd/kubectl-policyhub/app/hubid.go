package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// readHubID finds the hub's id where the hub published it (any namespace). It returns "" when no
// hub published one, and an error naming them when several did.
func readHubID(ctx context.Context, c client.Reader) (string, error) {
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.MatchingLabels{policyhubv1.LabelHubInfo: "true"}); err != nil {
		return "", fmt.Errorf("read the hub's id (ConfigMaps labelled %s): %w", policyhubv1.LabelHubInfo, err)
	}
	ids := map[string]bool{}
	var where []string
	for _, cm := range list.Items {
		if id := cm.Data[policyhubv1.HubInfoIDKey]; id != "" && cm.Name == policyhubv1.HubInfoName {
			if !ids[id] {
				where = append(where, fmt.Sprintf("%s (in %s)", id, cm.Namespace))
			}
			ids[id] = true
		}
	}
	switch len(ids) {
	case 0:
		return "", nil
	case 1:
		for id := range ids {
			return id, nil
		}
	}
	return "", fmt.Errorf("several hubs publish their id on this cluster: %v; choose one with --hub-id", where)
}

// resolveHubID sets the hub's id, unless --hub-id gave it: the id the hub published, else
// policyhub-hub's default.
func (o *options) resolveHubID(ctx context.Context, hub client.Reader) error {
	if o.hubID != "" {
		return nil
	}
	id, err := readHubID(ctx, hub)
	if err != nil {
		return err
	}
	if id == "" {
		id = policyhubv1.DefaultHubID
	}
	o.hubID = id
	return nil
}
