package v1alpha1

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A declaration's state in each of its clusters lives in ClusterStatusSlices, as a Service's
// endpoints live in EndpointSlices: its own status stays bounded at any fleet size, and a
// change in one cluster rewrites one slice of at most MaxClustersPerSlice clusters, not every
// cluster's entry.
const (
	// MaxClustersPerSlice is how many clusters one ClusterStatusSlice holds (its clusters'
	// MaxItems, which must stay equal): a hundred entries keep a slice near 16 KiB.
	MaxClustersPerSlice = 100
	// LabelDeclarationUID, on a ClusterStatusSlice, is the uid of the declaration it belongs to:
	// the hub and the CLI list a declaration's slices by it.
	LabelDeclarationUID = "policyhub.io/declaration-uid"
	// MaxAttention is how many clusters a declaration's status.summary.attention names.
	MaxAttention = 20
)

// The kinds of declaration, as a ClusterStatusSlice (and a rendered object's source) names them.
const (
	KindFleetPolicy       = "FleetPolicy"
	KindApplicationPolicy = "ApplicationPolicy"
)

// DeclarationRef names the declaration a ClusterStatusSlice belongs to.
type DeclarationRef struct {
	// Kind of the declaration.
	// +kubebuilder:validation:Enum=FleetPolicy;ApplicationPolicy;PolicySet;FleetPolicyException
	Kind string `json:"kind"`
	// Name of the declaration (an ApplicationPolicy is in the slice's namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the declaration: a declaration deleted and made again under the same name has new slices.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// ClusterStatusSlice is the state of one declaration in up to 100 of its clusters: sync phase,
// message, actions, in-force state, dry-run plan, report results and liveness. The hub writes
// them, and only them: FleetPolicies' slices in the hub's namespace, an ApplicationPolicy's in
// its own. `kubectl policyhub status NAME` joins a declaration's slices into one table.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=css,categories=policyhub
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.declaration.kind`
// +kubebuilder:printcolumn:name="Declaration",type=string,JSONPath=`.declaration.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterStatusSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Declaration this slice belongs to.
	Declaration DeclarationRef `json:"declaration"`

	// Clusters are the declaration's state in each of this slice's clusters, by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// ClusterStatusSliceList is a list of ClusterStatusSlices.
// +kubebuilder:object:root=true
type ClusterStatusSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterStatusSlice `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterStatusSlice{}, &ClusterStatusSliceList{})
}

// ClusterStatusSliceName is the name of a declaration's index-th slice: the declaration's kind
// and uid (names may be too long to add to), and the index.
func ClusterStatusSliceName(kind, uid string, index int) string {
	return fmt.Sprintf("%s-%s-%d", strings.ToLower(kind), uid, index)
}

// Of says whether the slice is the state of the declaration kind/name with that uid: it names it,
// and it is the slice's controller. Readers (the hub, the CLI) join only such slices: a slice
// that carries a declaration's uid label without being its own says nothing about it.
func (s *ClusterStatusSlice) Of(kind, name string, uid types.UID) bool {
	if s.Declaration.Kind != kind || s.Declaration.Name != name || s.Declaration.UID != string(uid) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(s)
	return ref != nil && ref.UID == uid && ref.Kind == kind && ref.Name == name
}

// JoinClusterStatusSlices is a declaration's state in every cluster its slices hold, by name.
// A cluster two slices name (a slice being rewritten) counts once, its first entry.
func JoinClusterStatusSlices(slices []ClusterStatusSlice) []ClusterStatus {
	ordered := make([]*ClusterStatusSlice, len(slices))
	for i := range slices {
		ordered[i] = &slices[i]
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Name < ordered[j].Name })
	var out []ClusterStatus
	seen := map[string]bool{}
	for _, slice := range ordered {
		for _, c := range slice.Clusters {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
