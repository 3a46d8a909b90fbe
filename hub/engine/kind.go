package engine

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Kind is a declaration kind as a hub runs it: its names and types (policyhubv1.DeclarationKinds,
// the list the CLI and the web view read too) and its reconciler, which runs its Declaration
// through the engine.
type Kind struct {
	policyhubv1.DeclarationKind
	// Setup registers the kind's reconciler with the manager.
	Setup func(ctrl.Manager) error
}

// Registry is the declaration kinds a hub runs, built once by its wiring (SetupHub); whatever
// concerns every kind (setting their reconcilers up, waking every declaration) iterates it.
type Registry []Kind

// NewRegistry pairs every kind of policyhubv1.DeclarationKinds, in its order, with its
// reconciler's setup (setups, by kind): a kind without one, or a setup of a kind not listed, is a
// mistake of the wiring.
func NewRegistry(setups map[string]func(ctrl.Manager) error) (Registry, error) {
	var r Registry
	for _, k := range policyhubv1.DeclarationKinds() {
		setup, ok := setups[k.Kind]
		if !ok {
			return nil, fmt.Errorf("no reconciler for the declaration kind %s", k.Kind)
		}
		r = append(r, Kind{DeclarationKind: k, Setup: setup})
	}
	if len(r) != len(setups) {
		return nil, fmt.Errorf("reconcilers for %d kinds, but policyhubv1.DeclarationKinds lists %d", len(setups), len(r))
	}
	return r, nil
}

// Setup registers every kind's reconciler with the manager.
func (r Registry) Setup(mgr ctrl.Manager) error {
	for _, k := range r {
		if err := k.Setup(mgr); err != nil {
			return fmt.Errorf("%s controller: %w", k.Kind, err)
		}
	}
	return nil
}
