package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tests that mostly wait (for Kyverno, an expiry, a soak) run side by side on the one fleet:
// such a test calls inParallel first. Each has a hub of its own (startHub) that reconciles only
// the declarations labelled with the test's scope, which the create helpers put on every
// declaration the test makes; its names, namespaces and placements are its own. A test that
// changes something every test sees (an agent's summary of a shared cluster, a cluster-wide
// admission policy, Kyverno's configuration, a cluster added to the fleet and placed by
// fleet-wide selectors, the hub's writes counted as a whole), or asserts on what a whole cluster
// holds (no Kyverno exception at all, two clusters' whole summaries alike), stays serial: Go runs
// the serial tests first, then the parallel ones together. A parallel test waits for what it
// needs (polls with a deadline) rather than reading once: side by side, everything is slower.

// labelTestScope, on a declaration, names the parallel test it belongs to.
const labelTestScope = "e2e.policyhub.io/test"

// scopes maps a parallel top-level test's name to its scope (the label's value).
var scopes sync.Map

// inParallel runs t side by side with the other parallel tests, its hub and declarations scoped
// to it.
func inParallel(t *testing.T) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("inParallel is for top-level tests: a subtest shares its parent's hub")
	}
	sum := sha256.Sum256([]byte(t.Name()))
	scopes.Store(t.Name(), hex.EncodeToString(sum[:])[:16])
	t.Parallel()
}

// testScope is the scope of t's top-level test, if it runs in parallel.
func testScope(t *testing.T) (string, bool) {
	top, _, _ := strings.Cut(t.Name(), "/")
	scope, ok := scopes.Load(top)
	if !ok {
		return "", false
	}
	return scope.(string), true
}

// scopeSelector selects the declarations of t's scope; nil when t is serial.
func scopeSelector(t *testing.T) labels.Selector {
	scope, ok := testScope(t)
	if !ok {
		return nil
	}
	return labels.SelectorFromSet(labels.Set{labelTestScope: scope})
}

// inScope labels a declaration t makes with t's scope, when t runs in parallel, so that its hub
// (and no other test's) reconciles it.
func inScope(t *testing.T, obj client.Object) {
	scope, ok := testScope(t)
	if !ok {
		return
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[labelTestScope] = scope
	obj.SetLabels(l)
}
