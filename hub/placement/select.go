package placement

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Cluster is one managed cluster of the inventory.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Inventory is what the hub knows of the fleet: its clusters, and the clusters each OCM
// Placement decided on.
type Inventory struct {
	// Clusters, sorted by name.
	Clusters []Cluster
	// Decisions maps an OCM Placement (namespace/name) to the clusters its PlacementDecisions list.
	Decisions map[types.NamespacedName][]string
	// OCM is true when the hub serves OCM's Placement API; Placements are the Placements there.
	OCM        bool
	Placements map[types.NamespacedName]bool
}

// placementKey is the OCM Placement a placementRef names; defaultNamespace is used without one.
func placementKey(ref *policyhubv1.PlacementRef, defaultNamespace string) types.NamespacedName {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = defaultNamespace
	}
	return key
}

// Names says whether p's placementRef names the OCM Placement key (defaultNamespace is used when
// the ref gives none): a change of that Placement or its decisions changes where p places.
func Names(p *policyhubv1.Placement, defaultNamespace string, key types.NamespacedName) bool {
	return p != nil && p.PlacementRef != nil && placementKey(p.PlacementRef, defaultNamespace) == key
}

// PlacementOf is the OCM Placement obj belongs to: a Placement itself, or the Placement a
// PlacementDecision is labelled with (OCM's contract).
func PlacementOf(obj client.Object) types.NamespacedName {
	if name, ok := obj.GetLabels()[clusterv1beta1.PlacementLabel]; ok {
		return types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// MissingPlacement says why the placement's placementRef selects nothing when the Placement it
// names does not exist (or OCM is not installed), naming the field what (e.g. spec.placement);
// "" when it exists or there is no placementRef.
func MissingPlacement(p policyhubv1.Placement, inv Inventory, defaultNamespace, what string) string {
	if p.PlacementRef == nil {
		return ""
	}
	ref := placementKey(p.PlacementRef, defaultNamespace)
	name := ref.Name
	if ref.Namespace != "" {
		name = ref.String()
	}
	switch {
	case !inv.OCM:
		return fmt.Sprintf("%s.placementRef names the OCM Placement %s, but the hub does not serve OCM's Placement API (open-cluster-management.io is not installed)", what, name)
	case !inv.Placements[ref] && len(inv.Decisions[ref]) == 0:
		// (Decisions without their Placement: OCM deletes them with it; trust them meanwhile.)
		return fmt.Sprintf("%s.placementRef: the OCM Placement %s does not exist", what, name)
	}
	return ""
}

// Target is one selected cluster and how the declaration applies there.
type Target struct {
	Cluster string
	// Mode in effect there: a cluster override's, else the spec's; nil keeps the template's.
	Mode *policyhubv1.Mode
	// DryRun: plan and dry-run apply only.
	DryRun bool
}

// Selection is the outcome of a placement.
type Selection struct {
	// Targets, sorted by cluster name.
	Targets []Target
	// Unknown are clusters named in the placement (or decided by OCM) that the inventory lacks.
	Unknown []string
}

// Select returns the clusters the placement selects: the union of clusters named, clusters whose
// labels match clusterSelector, and clusters of the placementRef's decisions. An empty placement
// selects nothing. defaultNamespace is used for a placementRef without namespace.
func Select(p policyhubv1.Placement, inv Inventory, defaultNamespace string) ([]string, []string, error) {
	known := map[string]bool{}
	for _, c := range inv.Clusters {
		known[c.Name] = true
	}
	picked := map[string]bool{}
	for _, name := range p.Clusters {
		picked[name] = true
	}
	if p.ClusterSelector != nil {
		sel, err := Selector(p.ClusterSelector)
		if err != nil {
			return nil, nil, fmt.Errorf("placement.clusterSelector: %w", err)
		}
		for _, c := range inv.Clusters {
			if sel.Matches(labels.Set(c.Labels)) {
				picked[c.Name] = true
			}
		}
	}
	if p.PlacementRef != nil {
		for _, name := range inv.Decisions[placementKey(p.PlacementRef, defaultNamespace)] {
			picked[name] = true
		}
	}
	var selected, unknown []string
	for name := range picked {
		if known[name] {
			selected = append(selected, name)
		} else {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(selected)
	sort.Strings(unknown)
	return selected, unknown, nil
}

// FleetPolicy selects a FleetPolicy's clusters and applies its cluster overrides (see Fleet).
func FleetPolicy(spec policyhubv1.FleetPolicySpec, inv Inventory) (Selection, error) {
	return Fleet(spec.Delivery, inv)
}

// PolicySet selects a PolicySet's clusters and applies its cluster overrides (see Fleet).
func PolicySet(spec policyhubv1.PolicySetSpec, inv Inventory) (Selection, error) {
	return Fleet(spec.Delivery, inv)
}

// Fleet selects a cluster-scoped declaration's clusters and applies its cluster overrides:
// excluded clusters are dropped, and mode and dry-run are resolved per cluster (later overrides
// win field by field over earlier ones and over the spec).
func Fleet(spec policyhubv1.Delivery, inv Inventory) (Selection, error) {
	selected, unknown, err := Select(spec.Placement, inv, "")
	if err != nil {
		return Selection{}, err
	}
	labelsOf := map[string]map[string]string{}
	for _, c := range inv.Clusters {
		labelsOf[c.Name] = c.Labels
	}
	overrideSelectors := make([]labels.Selector, len(spec.ClusterOverrides))
	for i, o := range spec.ClusterOverrides {
		if o.ClusterSelector != nil {
			if overrideSelectors[i], err = Selector(o.ClusterSelector); err != nil {
				return Selection{}, fmt.Errorf("clusterOverrides[%d].clusterSelector: %w", i, err)
			}
		}
	}
	sel := Selection{Unknown: unknown}
	for _, name := range selected {
		target := Target{Cluster: name, Mode: spec.Mode, DryRun: spec.DryRun}
		excluded := false
		for i, o := range spec.ClusterOverrides {
			if !slices.Contains(o.Clusters, name) && (overrideSelectors[i] == nil || !overrideSelectors[i].Matches(labels.Set(labelsOf[name]))) {
				continue
			}
			if o.Mode != nil {
				target.Mode = o.Mode
			}
			if o.DryRun != nil {
				target.DryRun = *o.DryRun
			}
			excluded = excluded || o.Exclude
		}
		if !excluded {
			sel.Targets = append(sel.Targets, target)
		}
	}
	return sel, nil
}

// Selector converts a cluster selector. One that requires no label is refused (admission
// refuses it too; this guards objects stored before that rule): empty, it would select every
// cluster, and with only NotIn and DoesNotExist every cluster without some label, the whole
// fleet by accident.
func Selector(ls *policyhubv1.ClusterSelector) (labels.Selector, error) {
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return nil, fmt.Errorf("empty selector would select every cluster: give matchLabels or matchExpressions")
	}
	if !ls.RequiresLabel() {
		return nil, fmt.Errorf("selector has only NotIn or DoesNotExist requirements and would select every cluster without those labels: add a matchLabels entry or a matchExpressions entry with operator In or Exists")
	}
	return metav1.LabelSelectorAsSelector(ls.LabelSelector())
}
