package push

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// These tests cover the pure decisions and what is written; run_test.go runs the loops in virtual
// time against a record of their writes. The writes to a real kube-apiserver are tested in e2e
// (agent_push_outage_test.go, agent_lease_recreate_test.go, agent_summary_recreate_test.go).

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDecide(t *testing.T) {
	const interval = 10 * time.Second
	pushed := state{Pushed: true, LastPush: t0, LastHash: "h1"}
	withPending := pushed
	withPending.Pending = true
	failedFirst := state{Failures: 1, RetryAt: at(time.Second)}
	failedAfterPush := state{Pushed: true, LastPush: t0, LastHash: "h1", Failures: 1, RetryAt: at(2 * time.Second)}
	failedLong := state{Pushed: true, LastPush: t0, LastHash: "h1", Failures: 5, RetryAt: at(5 * time.Minute)}
	idle := time.Time{}
	cases := []struct {
		name  string
		s     state
		now   time.Time
		next  time.Time
		force bool
	}{
		{"start: push now, forced", state{}, at(3 * time.Second), at(3 * time.Second), true},
		{"start with a change signalled: still now", state{Pending: true}, t0, t0, true},
		{"change before the interval: wait for the interval", withPending, at(2 * time.Second), at(interval), false},
		{"change after the interval: now, only if changed", withPending, at(30 * time.Second), at(interval), false},
		{"change long after the last push: now, still only if changed", withPending, at(time.Hour), at(interval), false},
		{"nothing changed: wait for a change, however long", pushed, at(2 * time.Second), idle, false},
		{"nothing changed for an hour: still no push (liveness is the Lease's)", pushed, at(time.Hour), idle, false},
		{"failed at start: retry at RetryAt, forced", failedFirst, t0, at(time.Second), true},
		{"failed soon after a push: not sooner than the interval", failedAfterPush, at(time.Second), at(interval), true},
		{"failed long after a push: at RetryAt", failedLong, at(4 * time.Minute), at(5 * time.Minute), true},
		{"failed with a change pending: still at RetryAt, forced", func() state { s := failedLong; s.Pending = true; return s }(), at(4 * time.Minute), at(5 * time.Minute), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// With no published pacing, the share is Interval: today's behaviour.
			next, force := decide(c.s, c.now, pace{Interval: interval, PushInterval: interval, Beat: time.Minute})
			if !next.Equal(c.next) || force != c.force {
				t.Errorf("decide = (%s, force %t), want (%s, force %t)", show(next), force, show(c.next), c.force)
			}
		})
	}
}

// show prints a decision's time relative to t0, or "idle" for the zero time.
func show(next time.Time) string {
	if next.IsZero() {
		return "idle"
	}
	return next.Sub(t0).String()
}

func TestDecideRenewal(t *testing.T) {
	const beat = time.Minute
	renewed := leaseState{Renewed: true, LastRenewal: at(5 * time.Second)}
	cases := []struct {
		name string
		s    leaseState
		want time.Time
	}{
		{"start: at once", leaseState{}, time.Time{}},
		{"renewed: a heartbeat after the renewal", renewed, at(5*time.Second + beat)},
		{"failed at start: at RetryAt", leaseState{Failures: 1, RetryAt: at(time.Second)}, at(time.Second)},
		{"failed after renewals: at RetryAt", leaseState{Renewed: true, LastRenewal: t0, Failures: 3, RetryAt: at(beat + 4*time.Second)}, at(beat + 4*time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := decideRenewal(c.s, beat); !got.Equal(c.want) {
				t.Errorf("decideRenewal = %s, want %s", show(got), show(c.want))
			}
		})
	}
}

func TestLeaseDurationSeconds(t *testing.T) {
	cases := []struct {
		beat time.Duration
		want int32
	}{
		{time.Minute, 180},
		{time.Second, 3},
		{1500 * time.Millisecond, 5}, // 4.5s, rounded up
		{333 * time.Millisecond, 1},
		{time.Hour, 10800},
		{math.MaxInt64, math.MaxInt32},
		{math.MaxInt32 * time.Second, math.MaxInt32},
	}
	for _, c := range cases {
		if got := leaseDurationSeconds(c.beat); got != c.want {
			t.Errorf("leaseDurationSeconds(%s) = %d, want %d", c.beat, got, c.want)
		}
	}
}

func TestNeedsWrite(t *testing.T) {
	cases := []struct {
		force          bool
		hash, lastHash string
		want           bool
	}{
		{false, "a", "a", false},
		{false, "b", "a", true},
		{false, "a", "", true},
		{true, "a", "a", true},
		{false, "", "", true},
		{false, "", "a", true},
	}
	for _, c := range cases {
		if got := needsWrite(c.force, c.hash, c.lastHash); got != c.want {
			t.Errorf("needsWrite(force %t, %q, last %q) = %t, want %t", c.force, c.hash, c.lastHash, got, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		failures int
		maxWait  time.Duration
		want     time.Duration
	}{
		{1, time.Minute, time.Second},
		{2, time.Minute, 2 * time.Second},
		{3, time.Minute, 4 * time.Second},
		{6, time.Minute, 32 * time.Second},
		{7, time.Minute, time.Minute},
		{1000, time.Minute, time.Minute},
		{1, 500 * time.Millisecond, 500 * time.Millisecond},
		{3, 500 * time.Millisecond, 500 * time.Millisecond},
		{3, 3 * time.Second, 3 * time.Second},
	}
	for _, c := range cases {
		if got := backoff(c.failures, c.maxWait); got != c.want {
			t.Errorf("backoff(%d, %s) = %s, want %s", c.failures, c.maxWait, got, c.want)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{Cluster: "cluster-1"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Interval != 10*time.Second || o.Heartbeat != time.Minute || o.MaxBackoff != time.Minute || o.Now == nil {
		t.Errorf("defaults: interval %s, heartbeat %s, max backoff %s, clock set %t", o.Interval, o.Heartbeat, o.MaxBackoff, o.Now != nil)
	}
	o, err = Options{Cluster: "c", Interval: time.Second, Heartbeat: 5 * time.Second, MaxBackoff: 2 * time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Interval != time.Second || o.Heartbeat != 5*time.Second || o.MaxBackoff != 2*time.Second {
		t.Errorf("given values changed: %+v", o)
	}
	for _, bad := range []struct {
		o    Options
		want string
	}{
		{Options{}, "Cluster is required"},
		{Options{Cluster: "Not_A_Namespace"}, "not a valid hub namespace name"},
		{Options{Cluster: "c", Interval: -time.Second}, "Interval is negative"},
		{Options{Cluster: "c", Heartbeat: -time.Second}, "Heartbeat is negative"},
		{Options{Cluster: "c", MaxBackoff: -time.Second}, "MaxBackoff is negative"},
	} {
		if _, err := bad.o.withDefaults(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: error %v, want one saying %q", bad.o, err, bad.want)
		}
	}
	if _, err := New(nil, Options{Cluster: "c"}); err == nil {
		t.Error("New accepted no hub client")
	}
	if _, err := NewWith(nil, Options{Cluster: "c"}); err == nil {
		t.Error("NewWith accepted no writes")
	}
}

func TestSummaryObject(t *testing.T) {
	w := &APIWrites{cluster: "cluster-1", beat: time.Minute}
	spec := policyhubv1.PolicyReportSummarySpec{
		Cluster:     "someone-else",
		ContentHash: "abc",
		Totals:      policyhubv1.ResultCounts{Pass: 3, Fail: 1},
		Policies:    []policyhubv1.PolicySummary{{Name: "cluster-wide"}, {Name: "limits", Namespace: "shop", Kind: "Policy"}},
	}
	obj, err := w.summaryObject(spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.GetAPIVersion() + " " + obj.GetKind(); got != "policyhub.io/v1alpha1 PolicyReportSummary" {
		t.Errorf("type %q", got)
	}
	if obj.GetNamespace() != "cluster-1" || obj.GetName() != SummaryName {
		t.Errorf("object %s/%s, want cluster-1/%s", obj.GetNamespace(), obj.GetName(), SummaryName)
	}
	for k := range obj.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" {
			t.Errorf("the applied object sets %q: the agent owns only metadata's name and spec", k)
		}
	}
	if meta := obj.Object["metadata"].(map[string]any); len(meta) != 2 {
		t.Errorf("metadata %v: want only name and namespace", meta)
	}
	s := obj.Object["spec"].(map[string]any)
	want := map[string]any{
		"cluster":           "cluster-1",
		"contentHash":       "abc",
		"generatedAt":       "2026-01-02T03:04:05Z",
		"heartbeatInterval": "1m0s",
	}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("spec.%s = %v, want %v", k, s[k], v)
		}
	}
	// Zero counts are sent too: applied as {}, totals would turn null on the hub once this
	// manager's earlier counts are removed.
	if totals := s["totals"].(map[string]any); fmt.Sprint(totals) != "map[error:0 fail:1 pass:3 skip:0 warn:0]" {
		t.Errorf("spec.totals = %v", totals)
	}
	if engine := s["engine"].(map[string]any); engine["kyvernoWebhooks"] != false {
		t.Errorf("spec.engine = %v: kyvernoWebhooks must be sent even when false", engine)
	}
	// Every key of the policies' map list is sent, empty ones too.
	if got := fmt.Sprint(s["policies"]); !strings.Contains(got, "map[kind: name:cluster-wide namespace: results:map[]]") ||
		!strings.Contains(got, "map[kind:Policy name:limits namespace:shop results:map[]]") {
		t.Errorf("spec.policies = %s: want name, namespace and kind in every entry", got)
	}
	// The caller's spec is not touched.
	if spec.Cluster != "someone-else" || spec.GeneratedAt != nil {
		t.Errorf("summaryObject changed the caller's spec: %+v", spec)
	}
}

// The Lease says who holds it (the cluster), for how long (three beats) and when it was renewed,
// and nothing else the agent has no use for.
func TestLeaseObject(t *testing.T) {
	l := leaseObject("cluster-1", t0, time.Minute)
	if l.Name == nil || *l.Name != LeaseName || l.Namespace == nil || *l.Namespace != "cluster-1" {
		t.Errorf("Lease %v/%v, want cluster-1/%s", l.Namespace, l.Name, LeaseName)
	}
	spec := l.Spec
	if h := spec.HolderIdentity; h == nil || *h != "cluster-1" {
		t.Errorf("holderIdentity %v, want cluster-1", h)
	}
	if d := spec.LeaseDurationSeconds; d == nil || *d != 180 {
		t.Errorf("leaseDurationSeconds %v, want 180 (3 × 1m)", d)
	}
	if rt := spec.RenewTime; rt == nil || !rt.Time.Equal(t0) {
		t.Errorf("renewTime %v, want %s", rt, t0)
	}
	if spec.AcquireTime != nil || spec.LeaseTransitions != nil || spec.Strategy != nil || spec.PreferredHolder != nil {
		t.Errorf("the agent sets fields it has no use for: %+v", spec)
	}
}

// A Heartbeat shorter than Interval acts as Interval in what New writes: the Lease lasts three
// intervals and the summary announces the interval, so the two never disagree.
func TestNewWritesWithTheLongerOfHeartbeatAndInterval(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p, err := New(unreachableHub(t, scheme), Options{Cluster: "cluster-1", Interval: 10 * time.Second, Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := p.writes.(*APIWrites)
	if d := leaseObject("cluster-1", t0, p.beat()).Spec.LeaseDurationSeconds; d == nil || *d != 30 {
		t.Errorf("leaseDurationSeconds %v, want 30", d)
	}
	obj, err := w.summaryObject(policyhubv1.PolicyReportSummarySpec{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if hb, _, _ := unstructured.NestedString(obj.Object, "spec", "heartbeatInterval"); hb != "10s" {
		t.Errorf("spec.heartbeatInterval %q, want 10s", hb)
	}
}

// unreachableHub is a client with scheme that is never used to reach a hub: for what New checks
// and makes before any request.
func unreachableHub(t *testing.T, scheme *runtime.Scheme) client.Client {
	t.Helper()
	hub, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return hub
}
