package placement

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Topology is one `topology` policy of a KubeVela Application: where the application runs, and
// in which namespace there.
type Topology struct {
	Placement policyhubv1.Placement
	// Namespace overrides the application's namespace in those clusters; empty keeps it.
	Namespace string
}

// Topologies reads the `topology` policies of a KubeVela Application (core.oam.dev/v1beta1):
// properties.clusters, properties.clusterLabelSelector (or the older clusterSelector) and
// properties.namespace.
func Topologies(app *unstructured.Unstructured) ([]Topology, error) {
	policies, _, err := unstructured.NestedSlice(app.Object, "spec", "policies")
	if err != nil {
		return nil, fmt.Errorf("application %s: spec.policies: %w", app.GetName(), err)
	}
	var out []Topology
	for _, p := range policies {
		entry, ok := p.(map[string]any)
		if !ok || entry["type"] != "topology" {
			continue
		}
		props, _ := entry["properties"].(map[string]any)
		var t Topology
		if clusters, ok := props["clusters"].([]any); ok {
			for _, c := range clusters {
				if name, ok := c.(string); ok && name != "" {
					t.Placement.Clusters = append(t.Placement.Clusters, name)
				}
			}
		}
		for _, key := range []string{"clusterLabelSelector", "clusterSelector"} {
			if sel, ok := props[key].(map[string]any); ok && len(sel) > 0 {
				t.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{}}
				for k, v := range sel {
					s, ok := v.(string)
					if !ok {
						return nil, fmt.Errorf("application %s: topology %v: %s.%s is not a string", app.GetName(), entry["name"], key, k)
					}
					t.Placement.ClusterSelector.MatchLabels[k] = s
				}
				break
			}
		}
		t.Namespace, _ = props["namespace"].(string)
		out = append(out, t)
	}
	return out, nil
}

// AppTarget is one place an ApplicationPolicy goes to: a cluster and a namespace in it.
type AppTarget struct {
	Cluster, Namespace string
	DryRun             bool
}

// AppSelection is where an ApplicationPolicy goes, and what it asked for that it may not reach.
type AppSelection struct {
	// Targets, sorted by cluster, then namespace: granted to the tenant.
	Targets []AppTarget
	// Unknown are clusters named that the inventory lacks.
	Unknown []string
	// NotGranted are the targets the placement (or the application's topology) selects that no
	// grant gives the tenant: never dispatched. Sorted like Targets.
	NotGranted []AppTarget
}

// ApplicationPolicy selects where an ApplicationPolicy goes: its own placement, in its own
// namespace; without one, the application's topologies (each in its namespace, default the
// ApplicationPolicy's). Neither selects nothing. Only what reach allows is a target: the rest is
// NotGranted. The tenant's own spec never widens its reach: a placementRef may name only an OCM
// Placement of the ApplicationPolicy's own namespace.
func ApplicationPolicy(ap *policyhubv1.ApplicationPolicy, topologies []Topology, inv Inventory, reach Reach) (AppSelection, error) {
	type key struct{ cluster, namespace string }
	picked := map[key]bool{}
	unknownSet := map[string]bool{}
	add := func(p policyhubv1.Placement, namespace, what string) error {
		if p.PlacementRef != nil && p.PlacementRef.Namespace != "" && p.PlacementRef.Namespace != ap.Namespace {
			return fmt.Errorf("%s.placementRef names a Placement in namespace %s: an ApplicationPolicy may use only Placements of its own namespace %s", what, p.PlacementRef.Namespace, ap.Namespace)
		}
		selected, unknown, err := Select(p, inv, ap.Namespace)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if namespace == "" {
			namespace = ap.Namespace
		}
		for _, c := range selected {
			picked[key{c, namespace}] = true
		}
		for _, c := range unknown {
			unknownSet[c] = true
		}
		return nil
	}
	if ap.Spec.Placement != nil {
		if err := add(*ap.Spec.Placement, "", "spec.placement"); err != nil {
			return AppSelection{}, err
		}
	} else {
		for i, t := range topologies {
			if err := add(t.Placement, t.Namespace, fmt.Sprintf("the application's topology %d", i)); err != nil {
				return AppSelection{}, err
			}
		}
	}
	var sel AppSelection
	for k := range picked {
		t := AppTarget{Cluster: k.cluster, Namespace: k.namespace, DryRun: ap.Spec.DryRun}
		if reach.Allows(k.cluster, k.namespace) {
			sel.Targets = append(sel.Targets, t)
		} else {
			sel.NotGranted = append(sel.NotGranted, t)
		}
	}
	for _, targets := range [][]AppTarget{sel.Targets, sel.NotGranted} {
		sort.Slice(targets, func(i, j int) bool {
			if targets[i].Cluster != targets[j].Cluster {
				return targets[i].Cluster < targets[j].Cluster
			}
			return targets[i].Namespace < targets[j].Namespace
		})
	}
	for c := range unknownSet {
		sel.Unknown = append(sel.Unknown, c)
	}
	sort.Strings(sel.Unknown)
	return sel, nil
}
