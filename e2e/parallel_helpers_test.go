package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tests that mostly wait (for Kyverno, an expiry, a soak) run side by side on the one fleet:
// such a test calls inParallel first. Each has a hub of its own (startHub) that reconciles only
// the declarations labelled with the test's scope, which the create helpers put on every
// declaration the test makes; its names, namespaces and placements are its own. A test that
// stops, silences or re-times an agent does it on a cluster of its own (aliasCluster: a name of
// its own on a shared apiserver); one that stops an apiserver on a fleet of its own (useOwnFleet).
// A test that changes something every test sees (an agent's summary of a shared cluster, a
// cluster-wide admission policy, Kyverno's configuration, the hub's writes counted as a whole),
// or asserts on what a whole cluster holds (no Kyverno exception at all, two clusters' whole
// summaries alike, its legacy objects), stays serial: Go runs the serial tests first, then the
// parallel ones together. A test whose declarations cannot carry its label runs in a lane instead
// (inLane): beside the parallel tests, one lane test at a time. A parallel test waits for what it
// needs (polls with a deadline) rather than reading once: side by side, everything is slower.

// labelTestScope, on a declaration, names the parallel test it belongs to.
const labelTestScope = "e2e.policyhub.io/test"

// scopes maps a parallel top-level test's name to its scope (the label's value).
var scopes sync.Map

// lanes maps a lane's name to the mutex its tests take turns on (see inLane); laneOf maps a
// lane test's name to its lane.
var lanes, laneOf sync.Map

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

// inLane runs t side by side with the parallel tests, and one at a time with the other tests of
// lane. It is for tests whose declarations another controller makes, so that they cannot carry
// a test's label (vela-core writes a KubeVela Application's ApplicationPolicies): the lane's hub
// reconciles the declarations that carry no scope label, which in the parallel phase only the
// lane's running test makes (the serial tests, run before, delete theirs as they end).
func inLane(t *testing.T, lane string) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("inLane is for top-level tests: a subtest shares its parent's hub")
	}
	scopes.Store(t.Name(), "lane-"+lane)
	laneOf.Store(t.Name(), lane)
	t.Parallel()
	mu, _ := lanes.LoadOrStore(lane, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	// Registered first, so it runs last: after the test's own cleanups deleted its declarations.
	t.Cleanup(mu.(*sync.Mutex).Unlock)
}

// inALane says whether t's top-level test runs in a lane.
func inALane(t *testing.T) bool {
	top, _, _ := strings.Cut(t.Name(), "/")
	_, ok := laneOf.Load(top)
	return ok
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

// scopeSelector selects the declarations of t's scope (in a lane, those of no scope); nil when
// t is serial.
func scopeSelector(t *testing.T) labels.Selector {
	scope, ok := testScope(t)
	if !ok {
		return nil
	}
	if inALane(t) {
		unscoped, err := labels.NewRequirement(labelTestScope, selection.DoesNotExist, nil)
		if err != nil {
			t.Fatal(err)
		}
		return labels.NewSelector().Add(*unscoped)
	}
	return labels.SelectorFromSet(labels.Set{labelTestScope: scope})
}

// inScope labels a declaration t makes with t's scope, when t runs in parallel, so that its hub
// (and no other test's) reconciles it.
func inScope(t *testing.T, obj client.Object) {
	scope, ok := testScope(t)
	if !ok || inALane(t) {
		return
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[labelTestScope] = scope
	obj.SetLabels(l)
}
