package work

import (
	"strings"
	"testing"

	"github.com/policyhub/policyhub/hub/plan"
)

// The object as the hub applied it, as the cluster holds it: Kyverno's schema defaults, server
// metadata, Kyverno's status.
const appliedPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
  uid: u-1
  generation: 3
  resourceVersion: "42"
  labels: {policyhub.io/managed-by: hub}
  annotations: {policyhub.io/content-hash: "sha256:1", policyhub.io/source: FleetPolicy/p}
spec:
  admission: true
  background: true
  rules:
  - name: r
    skipBackgroundRequests: true
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate:
      failureAction: Enforce
      pattern: {spec: {replicas: 3}}
status: {ready: true}
`

// A cluster admin's apply under policyhub's own field-manager name leaves managedFields as the
// hub's apply would, and adds keys inSync tolerates (a rule may carry keys the hub did not set:
// Kyverno's defaults). Compared with what the hub's apply would leave, every such addition is
// drift; what the server keeps (versions, status) is not.
func TestAppliedAsLive(t *testing.T) {
	after := yamlObj(t, appliedPolicy)
	for _, tc := range []struct {
		name string
		live string
		want bool
	}{
		{"as applied", appliedPolicy, true},
		{"server metadata and status differ", strings.NewReplacer(`resourceVersion: "42"`, `resourceVersion: "50"`, "generation: 3", "generation: 3\n  managedFields: [{manager: kyverno}]", "status: {ready: true}", "status: {ready: false}").Replace(appliedPolicy), true},
		{"an exclude added to a rule", strings.Replace(appliedPolicy, "    validate:", "    exclude: {any: [{resources: {namespaces: [prod]}}]}\n    validate:", 1), false},
		{"a default changed", strings.Replace(appliedPolicy, "background: true", "background: false", 1), false},
		{"a spec field added", strings.Replace(appliedPolicy, "admission: true", "admission: true\n  validationFailureActionOverrides: [{action: Audit, namespaces: [prod]}]", 1), false},
		{"a top-level field added", appliedPolicy + "extra: {x: 1}\n", false},
		{"an annotation added", strings.Replace(appliedPolicy, "policyhub.io/source: FleetPolicy/p}", "policyhub.io/source: FleetPolicy/p, pod-policies.kyverno.io/autogen-controllers: none}", 1), false},
		{"a label removed", strings.Replace(appliedPolicy, "labels: {policyhub.io/managed-by: hub}", "labels: {}", 1), false},
		{"a finalizer added", strings.Replace(appliedPolicy, "  uid: u-1", "  uid: u-1\n  finalizers: [admin.example/keep]", 1), false},
		{"an owner reference added", strings.Replace(appliedPolicy, "  uid: u-1", "  uid: u-1\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: c, uid: x}]", 1), false},
		{"the spec gone", strings.Replace(appliedPolicy, "spec:", "other:", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appliedAsLive(yamlObj(t, tc.live), after); got != tc.want {
				t.Errorf("appliedAsLive = %v, want %v", got, tc.want)
			}
		})
	}
	if floats := object(t, appliedPolicy); !appliedAsLive(floats, after) {
		t.Error("numbers decoded as float64 differ from the same int64s")
	}
	empty := yamlObj(t, strings.Replace(appliedPolicy, "  uid: u-1", "  uid: u-1\n  finalizers: []", 1))
	if !appliedAsLive(empty, after) {
		t.Error("an empty finalizer list differs from none")
	}
}

// The hub remembers the state it verified of each owned object, and asks again when the object
// changed in any way an apply could (its generation, labels, annotations, finalizers, owner
// references, or it is another object of the same name), but not for a status write.
func TestVerificationsRememberTheVerifiedState(t *testing.T) {
	v := newVerifications(2)
	verified := yamlObj(t, appliedPolicy)
	if v.holds(verified) {
		t.Fatal("an object never verified holds")
	}
	v.record(verified)
	if !v.holds(verified) {
		t.Fatal("the recorded state does not hold")
	}
	same := yamlObj(t, strings.NewReplacer(`resourceVersion: "42"`, `resourceVersion: "43"`, "status: {ready: true}", "status: {ready: false}").Replace(appliedPolicy))
	if !v.holds(same) {
		t.Error("a status write (new resourceVersion, same generation and metadata) is not verified")
	}
	for _, tc := range []struct{ name, from, to string }{
		{"new generation", "generation: 3", "generation: 4"},
		{"label added", "labels: {policyhub.io/managed-by: hub}", "labels: {policyhub.io/managed-by: hub, x: y}"},
		{"label value changed", "managed-by: hub}", "managed-by: hub2}"},
		{"label moved to annotations", "labels: {policyhub.io/managed-by: hub}\n  annotations: {", "labels: {}\n  annotations: {policyhub.io/managed-by: hub, "},
		{"annotation added", "policyhub.io/source: FleetPolicy/p}", "policyhub.io/source: FleetPolicy/p, a: b}"},
		{"finalizer added", "  uid: u-1", "  uid: u-1\n  finalizers: [f]"},
		{"owner reference added", "  uid: u-1", "  uid: u-1\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: c, uid: x}]"},
		{"recreated (another uid)", "uid: u-1", "uid: u-2"},
	} {
		changed := yamlObj(t, strings.Replace(appliedPolicy, tc.from, tc.to, 1))
		if changed.GetGeneration() == 0 {
			t.Fatalf("%s: the fixture lost its generation", tc.name)
		}
		if v.holds(changed) {
			t.Errorf("%s: still verified", tc.name)
		}
	}

	// A state found drifted is not asked about again until it changes or the hub writes.
	drifted := yamlObj(t, strings.Replace(appliedPolicy, "generation: 3", "generation: 6", 1))
	v.recordDrift(drifted)
	if got := v.verdictOf(drifted); got != stateDrifted {
		t.Errorf("verdict of a drifted state %v, want drifted", got)
	}
	if !v.changed(drifted) {
		t.Error("a change to a drifted state (its status) is not reported: the drift would stay")
	}
	if got := v.verdictOf(yamlObj(t, strings.Replace(appliedPolicy, "generation: 3", "generation: 7", 1))); got != stateUnknown {
		t.Errorf("verdict of a later state %v, want unknown", got)
	}
	v.record(verified)
	if got := v.verdictOf(drifted); got != stateUnknown || len(v.drifted) != 0 {
		t.Errorf("after the hub's write: verdict of the drifted state %v, %d drifted kept", got, len(v.drifted))
	}

	// Forgotten with the object.
	v.forget(plan.KeyOf(verified))
	if v.holds(verified) {
		t.Error("a forgotten object is still verified")
	}
	// Bounded: past max objects, the memory starts over.
	v.record(verified)
	other := yamlObj(t, strings.Replace(appliedPolicy, "name: p", "name: q", 1))
	v.record(other)
	third := yamlObj(t, strings.Replace(appliedPolicy, "name: p", "name: r", 1))
	v.record(third)
	if len(v.states) > 2 || !v.holds(third) {
		t.Errorf("%d states remembered (max 2), the last one held: %v", len(v.states), v.holds(third))
	}
	// Another cluster's memory (its own seed) verifies nothing of this one's.
	if newVerifications(2).holds(third) {
		t.Error("a new memory holds an object")
	}
}

// A digest keyed per memory: equal states digest equally within one memory.
func TestVerifiedStateIgnoresMapOrder(t *testing.T) {
	v := newVerifications(10)
	a := yamlObj(t, `{apiVersion: v1, kind: X, metadata: {name: a, generation: 1, labels: {a: "1", b: "2"}, annotations: {c: "3"}}}`)
	b := yamlObj(t, `{apiVersion: v1, kind: X, metadata: {name: a, generation: 1, annotations: {c: "3"}, labels: {b: "2", a: "1"}}}`)
	if v.stateOf(a) != v.stateOf(b) {
		t.Error("equal metadata digests differently")
	}
	swapped := yamlObj(t, `{apiVersion: v1, kind: X, metadata: {name: a, generation: 1, labels: {a: "2", b: "1"}, annotations: {c: "3"}}}`)
	if v.stateOf(a) == v.stateOf(swapped) {
		t.Error("label values swapped digest the same")
	}
}

// The watch may bring the hub's own write before the write's answer is recorded: that change is
// judged once the answer is, so the hub's writes cost no pass, and another writer's change in
// between is still reported.
func TestChangesSeenDuringTheHubsWrite(t *testing.T) {
	v := newVerifications(10)
	before := yamlObj(t, appliedPolicy)
	answer := yamlObj(t, strings.Replace(appliedPolicy, "generation: 3", "generation: 4", 1))
	foreign := yamlObj(t, strings.Replace(appliedPolicy, "generation: 3", "generation: 5", 1))
	key := plan.KeyOf(before)

	if !v.changed(before) {
		t.Fatal("a change to an object never verified is verified")
	}
	v.writing(key)
	if v.changed(answer) {
		t.Error("a change seen during the write is reported before the write's answer")
	}
	if missed := v.writeDone(key, answer); missed != nil {
		t.Errorf("the hub's own write reported as a change: generation %d", missed.GetGeneration())
	}
	if v.changed(answer) {
		t.Error("the written state is not verified")
	}

	v.writing(key)
	v.changed(answer)
	v.changed(foreign) // the latest wins
	if missed := v.writeDone(key, answer); missed == nil || missed.GetGeneration() != 5 {
		t.Errorf("another writer's change during the write: %v, want it reported", missed)
	}

	v.writing(key)
	v.changed(foreign)
	if missed := v.writeDone(key, nil); missed == nil {
		t.Error("a change during a refused write is not reported")
	}
	if len(v.inFlight) != 0 || len(v.seen) != 0 {
		t.Errorf("writes left behind: %v in flight, %d seen", v.inFlight, len(v.seen))
	}
}
