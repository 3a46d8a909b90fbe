package app

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// readHubID finds the hub's id where the hub published it (any namespace). It returns "" when no
// hub published one, and an error naming them when several did.
func readHubID(ctx context.Context, c client.Reader) (string, error) {
	published, err := publishedHubs(ctx, c)
	if err != nil {
		return "", err
	}
	var where []string
	for id, namespaces := range published {
		where = append(where, fmt.Sprintf("%s (in %s)", id, namespaces[0]))
	}
	switch len(published) {
	case 0:
		return "", nil
	case 1:
		for id := range published {
			return id, nil
		}
	}
	slices.Sort(where)
	return "", fmt.Errorf("several hubs publish their id on this cluster: %v; choose one with --hub-id", where)
}

// publishedHubs are the hub ids published on the cluster, each with the namespaces publishing it
// (the hubs' own namespaces).
func publishedHubs(ctx context.Context, c client.Reader) (map[string][]string, error) {
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.MatchingLabels{policyhubv1.LabelHubInfo: "true"}); err != nil {
		return nil, fmt.Errorf("read the hub's id (ConfigMaps labelled %s): %w", policyhubv1.LabelHubInfo, err)
	}
	out := map[string][]string{}
	for _, cm := range list.Items {
		if id := cm.Data[policyhubv1.HubInfoIDKey]; id != "" && cm.Name == policyhubv1.HubInfoName {
			out[id] = append(out[id], cm.Namespace)
		}
	}
	return out, nil
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
