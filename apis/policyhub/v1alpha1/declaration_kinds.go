package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeclarationObject is an object of a declaration kind (a controller-runtime client.Object).
// +kubebuilder:object:generate=false
type DeclarationObject interface {
	metav1.Object
	runtime.Object
}

// Declaration is an object of a declaration kind: its status holds what every kind's does.
// +kubebuilder:object:generate=false
type Declaration interface {
	DeclarationObject
	DeclarationStatus() DeclarationStatus
}

// DeclarationStatus points at the fields the status of every declaration kind holds: its
// observed generation, its conditions (Ready, Reconciling, Stalled) and its clusters' summary.
// +kubebuilder:object:generate=false
type DeclarationStatus struct {
	ObservedGeneration *int64
	Conditions         *[]metav1.Condition
	Summary            *StatusSummary
}

// DeclarationObjectList is a list of a declaration kind (a controller-runtime client.ObjectList).
// +kubebuilder:object:generate=false
type DeclarationObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// DeclarationKind names one kind of declaration the hub syncs into clusters, as the hub's wiring,
// the CLI and the web view list them: a new kind is one more entry of DeclarationKinds.
// +kubebuilder:object:generate=false
type DeclarationKind struct {
	// Kind is the API kind, e.g. FleetPolicy.
	Kind string
	// Singular, Plural and ShortName are its resource names (its CRD's), as the CLI's arguments
	// and the web view's paths take them.
	Singular, Plural, ShortName string
	// Namespaced: its objects live in a namespace (a tenant's); a cluster-scoped kind's are the
	// platform's.
	Namespaced bool
	// ShipsPolicies: it ships policies of its own, shown by `kubectl policyhub status` and on the
	// web view's declaration pages (an exception only exempts from another declaration's).
	ShipsPolicies bool
	// New and NewList make an empty object and an empty list of the kind.
	New     func() Declaration
	NewList func() DeclarationObjectList
}

// DeclarationKinds are the kinds of declaration, in the order they are shown. A new slice at each
// call: the list is the same for every caller and no caller can change another's.
func DeclarationKinds() []DeclarationKind {
	return []DeclarationKind{
		{Kind: KindFleetPolicy, Singular: "fleetpolicy", Plural: "fleetpolicies", ShortName: "fp", ShipsPolicies: true,
			New: func() Declaration { return &FleetPolicy{} }, NewList: func() DeclarationObjectList { return &FleetPolicyList{} }},
		{Kind: KindPolicySet, Singular: "policyset", Plural: "policysets", ShortName: "pset", ShipsPolicies: true,
			New: func() Declaration { return &PolicySet{} }, NewList: func() DeclarationObjectList { return &PolicySetList{} }},
		{Kind: KindApplicationPolicy, Singular: "applicationpolicy", Plural: "applicationpolicies", ShortName: "ap", Namespaced: true, ShipsPolicies: true,
			New: func() Declaration { return &ApplicationPolicy{} }, NewList: func() DeclarationObjectList { return &ApplicationPolicyList{} }},
		{Kind: KindFleetPolicyException, Singular: "fleetpolicyexception", Plural: "fleetpolicyexceptions", ShortName: "fpex", Namespaced: true,
			New: func() Declaration { return &FleetPolicyException{} }, NewList: func() DeclarationObjectList { return &FleetPolicyExceptionList{} }},
	}
}

// DeclarationKindOf is the declaration kind named kind (false: no such kind).
func DeclarationKindOf(kind string) (DeclarationKind, bool) {
	for _, k := range DeclarationKinds() {
		if k.Kind == kind {
			return k, true
		}
	}
	return DeclarationKind{}, false
}
