package push

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// base is a summary with something in every field urgency looks at.
func base() policyhubv1.PolicyReportSummarySpec {
	oldest := metav1.NewTime(t0)
	return policyhubv1.PolicyReportSummarySpec{
		ContentHash: "h1",
		Engine:      policyhubv1.EngineInfo{KyvernoWebhooks: true, PolicyAPIs: []string{"policies.kyverno.io/v1"}},
		Totals:      policyhubv1.ResultCounts{Pass: 10, Fail: 2, Warn: 1, Error: 1, Skip: 3},
		Blocked:     4,
		Policies: []policyhubv1.PolicySummary{
			{Name: "require-labels", Kind: "ValidatingPolicy", Results: policyhubv1.ResultCounts{Pass: 5, Fail: 2}, Blocked: 4, OldestResult: &oldest},
			{Name: "limits", Namespace: "shop", Kind: "NamespacedValidatingPolicy", Results: policyhubv1.ResultCounts{Pass: 5, Error: 1}},
		},
		Applications: []policyhubv1.ApplicationSummary{
			{Namespace: "shop", Name: "cart", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 3, Fail: 2}},
			{Namespace: "shop", Name: "web", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 2}},
		},
		Namespaces: []policyhubv1.NamespaceSummary{{Namespace: "shop", Results: policyhubv1.ResultCounts{Pass: 10, Fail: 2}}},
		Violations: []policyhubv1.Violation{{Policy: "require-labels", Result: "fail", Message: "label app missing",
			Resource: policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: "cart-1"}}},
		Exceptions: []policyhubv1.ExceptionResults{{Name: "allow-debug", Results: 3}},
		Shadows:    []policyhubv1.ShadowResults{{Name: "policyhub-shadow-limits", Kind: "ValidatingPolicy", ContentHash: "c1", WouldFail: 1}},
	}
}

func TestUrgent(t *testing.T) {
	later := metav1.NewTime(t0.Add(time.Hour))
	cases := []struct {
		name   string
		change func(*policyhubv1.PolicyReportSummarySpec)
		want   bool
	}{
		{"nothing but the hash", func(s *policyhubv1.PolicyReportSummarySpec) { s.ContentHash = "h2" }, false},
		// Urgent: what the hub must show at once.
		{"a policy's fail count", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies[0].Results.Fail++ }, true},
		{"a policy's error count", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies[1].Results.Error = 0 }, true},
		{"a policy's blocked count", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies[0].Blocked++ }, true},
		{"a policy listed", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Policies = append(s.Policies, policyhubv1.PolicySummary{Name: "new", Kind: "ValidatingPolicy"})
		}, true},
		{"a policy dropped", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies = s.Policies[:1] }, true},
		{"a policy's kind changed (converted)", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies[1].Kind = "Policy" }, true},
		{"total fail", func(s *policyhubv1.PolicyReportSummarySpec) { s.Totals.Fail++ }, true},
		{"total error", func(s *policyhubv1.PolicyReportSummarySpec) { s.Totals.Error-- }, true},
		{"total blocked", func(s *policyhubv1.PolicyReportSummarySpec) { s.Blocked++ }, true},
		{"engine: webhooks gone", func(s *policyhubv1.PolicyReportSummarySpec) { s.Engine.KyvernoWebhooks = false }, true},
		{"engine: a policy API served", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Engine.PolicyAPIs = append(s.Engine.PolicyAPIs, "policies.kyverno.io/v1beta1")
		}, true},
		{"engine: Kyverno's version", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: "v1.20.0"}
		}, true},
		{"an application's fail count", func(s *policyhubv1.PolicyReportSummarySpec) { s.Applications[0].Results.Fail = 0 }, true},
		{"an application's blocked count", func(s *policyhubv1.PolicyReportSummarySpec) { s.Applications[1].Blocked = 1 }, true},
		{"an application with failures dropped", func(s *policyhubv1.PolicyReportSummarySpec) { s.Applications = s.Applications[1:] }, true},
		{"an application failing listed", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Applications = append(s.Applications, policyhubv1.ApplicationSummary{Namespace: "a", Name: "b", Policy: "p", Results: policyhubv1.ResultCounts{Error: 1}})
		}, true},
		{"truncation appears", func(s *policyhubv1.PolicyReportSummarySpec) { s.Truncated = &policyhubv1.Truncation{Policies: 3} }, true},
		{"a shadow listed", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Shadows = append(s.Shadows, policyhubv1.ShadowResults{Name: "policyhub-shadow-x"})
		}, true},
		{"a shadow of a new candidate version", func(s *policyhubv1.PolicyReportSummarySpec) { s.Shadows[0].ContentHash = "c2" }, true},
		// Not urgent: deferred to the share, never lost.
		{"pass, warn and skip counts", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Totals.Pass, s.Totals.Warn, s.Totals.Skip = 99, 9, 0
			s.Policies[0].Results.Pass, s.Policies[1].Results.Warn, s.Policies[1].Results.Skip = 1, 2, 3
			s.Applications[0].Results.Pass = 7
		}, false},
		{"oldestResult moved", func(s *policyhubv1.PolicyReportSummarySpec) { s.Policies[0].OldestResult = &later }, false},
		{"a violation's message", func(s *policyhubv1.PolicyReportSummarySpec) { s.Violations[0].Message = "label app is missing" }, false},
		{"violations reordered", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Violations = append([]policyhubv1.Violation{{Policy: "limits", Result: "error"}}, s.Violations...)
		}, false},
		{"a namespace's counts (the policies' again)", func(s *policyhubv1.PolicyReportSummarySpec) { s.Namespaces[0].Results.Pass = 1 }, false},
		{"an exception's results", func(s *policyhubv1.PolicyReportSummarySpec) { s.Exceptions[0].Results = 4 }, false},
		{"a shadow's counts", func(s *policyhubv1.PolicyReportSummarySpec) { s.Shadows[0].WouldFail = 5 }, false},
		{"a policy's title and severity", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Policies[0].Title, s.Policies[0].Severity = "t", "high"
		}, false},
		{"a passing application listed", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Applications = append(s.Applications, policyhubv1.ApplicationSummary{Namespace: "a", Name: "b", Policy: "p", Results: policyhubv1.ResultCounts{Pass: 1}})
		}, false},
		{"a passing application dropped", func(s *policyhubv1.PolicyReportSummarySpec) { s.Applications = s.Applications[:1] }, false},
		{"policies reordered", func(s *policyhubv1.PolicyReportSummarySpec) {
			s.Policies[0], s.Policies[1] = s.Policies[1], s.Policies[0]
		}, false},
		{"an empty list for none (nil and empty alike)", func(s *policyhubv1.PolicyReportSummarySpec) { s.Engine.ReportAPIs = []string{} }, false},
		{"an absent truncation made explicit", func(s *policyhubv1.PolicyReportSummarySpec) { s.Truncated = &policyhubv1.Truncation{} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev, next := base(), base()
			c.change(&next)
			if got := urgent(&prev, next); got != c.want {
				t.Errorf("urgent = %t, want %t", got, c.want)
			}
		})
	}
	if !urgent(nil, base()) {
		t.Error("urgent with nothing pushed yet = false, want true")
	}
}

// paced is a pace with the hub's share of 160s (a thousand clusters at ten summaries a second,
// doubled up from 10s).
var paced = pace{Interval: 10 * time.Second, PushInterval: 160 * time.Second, Beat: time.Minute}

func TestDecidePaced(t *testing.T) {
	spent := func(n int, at time.Time) reserve { return reserve{Spent: n, SpentAt: at} }
	pushed := state{Pushed: true, LastPush: t0, LastHash: "h1", reserve: spent(1, t0)}
	with := func(f func(*state)) state { s := pushed; f(&s); return s }
	idle := time.Time{}
	cases := []struct {
		name string
		s    state
		now  time.Time
		next time.Time
	}{
		{"change pending, reserve left: look at Interval (urgent or not)", with(func(s *state) { s.Pending = true }), at(time.Second), at(10 * time.Second)},
		{"change deferred: at the share", with(func(s *state) { s.Deferred = true }), at(20 * time.Second), at(160 * time.Second)},
		{"deferred and a new change pending: look at it first", with(func(s *state) { s.Deferred, s.Pending = true, true }), at(20 * time.Second), at(10 * time.Second)},
		{"reserve spent, change pending: when one is refilled", with(func(s *state) {
			s.Pending, s.reserve = true, spent(policyhubv1.UrgentPushes, at(-100*time.Second))
		}), at(time.Second), at(60 * time.Second)},
		{"reserve spent, deferred and pending: the refill comes before the share", with(func(s *state) {
			s.Pending, s.Deferred, s.reserve = true, true, spent(policyhubv1.UrgentPushes, at(-100*time.Second))
		}), at(time.Second), at(60 * time.Second)},
		{"nothing changed: idle", pushed, at(time.Hour), idle},
		{"failure: RetryAt, not sooner than Interval, whatever the share", with(func(s *state) {
			s.Failures, s.RetryAt, s.Deferred = 1, at(time.Second), true
		}), at(time.Second), at(10 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, force := decide(c.s, c.now, paced)
			if !next.Equal(c.next) {
				t.Errorf("decide = %s, want %s", show(next), show(c.next))
			}
			if want := c.s.Failures > 0; force != want {
				t.Errorf("force %t, want %t", force, want)
			}
		})
	}
}

func TestMayPush(t *testing.T) {
	withReserve := func(n int) state {
		return state{Pushed: true, LastPush: t0, reserve: reserve{Spent: n, SpentAt: t0}}
	}
	cases := []struct {
		name   string
		s      state
		now    time.Time
		urgent bool
		want   bool
	}{
		{"not urgent before the share: deferred", withReserve(1), at(10 * time.Second), false, false},
		{"not urgent at the share: pushed", withReserve(1), at(160 * time.Second), false, true},
		{"urgent at Interval with the reserve: pushed", withReserve(1), at(10 * time.Second), true, true},
		{"urgent before Interval: not yet", withReserve(1), at(9 * time.Second), true, false},
		{"urgent with the reserve spent: deferred", withReserve(policyhubv1.UrgentPushes), at(10 * time.Second), true, false},
		{"urgent, a second before the reserve refills", withReserve(policyhubv1.UrgentPushes), at(159 * time.Second), true, false},
		{"at the share, the reserve spent an interval ago: pushed", withReserve(policyhubv1.UrgentPushes), at(160 * time.Second), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mayPush(c.s, c.now, paced, c.urgent); got != c.want {
				t.Errorf("mayPush = %t, want %t", got, c.want)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	const every = 160 * time.Second
	var r reserve
	if left, refill := r.left(t0, every); left != policyhubv1.UrgentPushes || !refill.IsZero() {
		t.Fatalf("a new reserve: %d left, refill %s; want full", left, show(refill))
	}
	// Six pushes ten seconds apart spend it all; the refill clock starts at the first.
	for i := range policyhubv1.UrgentPushes {
		r = r.spend(at(time.Duration(i)*10*time.Second), every)
	}
	if left, refill := r.left(at(55*time.Second), every); left != 0 || !refill.Equal(at(every)) {
		t.Errorf("spent: %d left, refill at %s; want 0 and 2m40s", left, show(refill))
	}
	if left, refill := r.left(at(every), every); left != 1 || !refill.Equal(at(2*every)) {
		t.Errorf("one interval on: %d left, next refill %s; want 1 and 5m20s", left, show(refill))
	}
	// Spending at a refill leaves none, the clock running on.
	r = r.spend(at(every), every)
	if left, refill := r.left(at(every), every); left != 0 || !refill.Equal(at(2*every)) {
		t.Errorf("spent the refilled one: %d left, next refill %s; want 0 and 5m20s", left, show(refill))
	}
	if left, _ := r.left(at(100*every), every); left != policyhubv1.UrgentPushes {
		t.Errorf("long after: %d left, want full", left)
	}
	// A clock that went back refills nothing and breaks nothing.
	if left, _ := r.left(at(-time.Hour), every); left != 0 {
		t.Errorf("before the spending: %d left, want 0", left)
	}
	// Spending an empty reserve keeps it empty (a forced push: start or retry).
	empty := reserve{Spent: policyhubv1.UrgentPushes, SpentAt: t0}
	if got := empty.spend(at(time.Second), every); got.Spent != policyhubv1.UrgentPushes {
		t.Errorf("spent past empty: %d spent", got.Spent)
	}
}

func TestCheckPacing(t *testing.T) {
	pacing := func(push, beat time.Duration) *policyhubv1.SummaryPacing {
		return &policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: push}, HeartbeatInterval: metav1.Duration{Duration: beat}, Clusters: 1000}
	}
	cases := []struct {
		name    string
		in      *policyhubv1.SummaryPacing
		want    published
		problem bool
	}{
		{"none (an older hub)", nil, published{}, false},
		{"in bounds", pacing(160*time.Second, 2*time.Minute), published{Push: 160 * time.Second, Beat: 2 * time.Minute, Clusters: 1000}, false},
		{"left out: not published", pacing(0, 0), published{Clusters: 1000}, false},
		{"too short: the floors", pacing(time.Second, time.Second), published{Push: policyhubv1.MinPushInterval, Beat: policyhubv1.MinHeartbeatInterval, Clusters: 1000}, true},
		{"too long: the cap", pacing(48*time.Hour, 48*time.Hour), published{Push: policyhubv1.MaxPacingInterval, Beat: policyhubv1.MaxPacingInterval, Clusters: 1000}, true},
		{"negative: the floors", pacing(-time.Minute, -time.Minute), published{Push: policyhubv1.MinPushInterval, Beat: policyhubv1.MinHeartbeatInterval, Clusters: 1000}, true},
		{"negative clusters: zero", &policyhubv1.SummaryPacing{Clusters: -5}, published{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, problem := checkPacing(c.in)
			if got != c.want || (problem != "") != c.problem {
				t.Errorf("checkPacing = %+v, problem %q; want %+v, a problem %t", got, problem, c.want, c.problem)
			}
		})
	}
}

// The agent's own intervals are floors: the hub slows an agent, never speeds it.
func TestPaceOf(t *testing.T) {
	o := Options{Interval: 30 * time.Second, Heartbeat: 5 * time.Minute}
	cases := []struct {
		name string
		pub  published
		want pace
	}{
		{"none published: the flags", published{}, pace{30 * time.Second, 30 * time.Second, 5 * time.Minute}},
		{"longer published: the hub's", published{Push: 160 * time.Second, Beat: 8 * time.Minute}, pace{30 * time.Second, 160 * time.Second, 8 * time.Minute}},
		{"shorter published: the flags", published{Push: 10 * time.Second, Beat: time.Minute}, pace{30 * time.Second, 30 * time.Second, 5 * time.Minute}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := paceOf(o, c.pub); got != c.want {
				t.Errorf("paceOf = %+v, want %+v", got, c.want)
			}
		})
	}
}
