package evaluate

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/collect"
)

// A policy's results keep the time its current version (with its bindings') was first
// evaluated: an unchanged policy's results do not change with every evaluation (a quiet cluster
// pushes nothing), a changed policy or binding starts again.
func TestSinceOf(t *testing.T) {
	r := &Runner{since: map[string]sinceEntry{}}
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Generation: 1}}
	b := binding("b", "p", "Deny")
	b.Generation = 1
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(now time.Time) time.Time {
		return r.sinceOf([]*admissionregistrationv1.ValidatingAdmissionPolicy{p}, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{b}, now)["p"]
	}
	if got := at(t0); !got.Equal(t0) {
		t.Fatalf("first evaluation: %v", got)
	}
	if got := at(t0.Add(time.Minute)); !got.Equal(t0) {
		t.Errorf("unchanged: %v, want %v", got, t0)
	}
	b.Generation = 2
	if got := at(t0.Add(2 * time.Minute)); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("binding changed: %v", got)
	}
	p.Generation = 2
	if got := at(t0.Add(3 * time.Minute)); !got.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("policy changed: %v", got)
	}
	r.sinceOf(nil, nil, t0.Add(4*time.Minute))
	if len(r.since) != 0 {
		t.Errorf("a policy gone is forgotten: %v", r.since)
	}
}

// Equal results have equal fingerprints; any change of what a snapshot would get changes it.
func TestFingerprint(t *testing.T) {
	mk := func(fail int32, msg string, blocked int64) *Result {
		key := Key("p")
		pc := collect.NewPolicyCounts(key, "", "", collect.Counts{Fail: fail, Pass: 1 - fail})
		d := &collect.Digest{Resource: collect.Resource{Kind: "Deployment", Name: "web", UID: "u1"}, Policies: []collect.PolicyCounts{pc}}
		if fail > 0 {
			d.Violations = []collect.Violation{{Policy: key, Result: "fail", Message: msg}}
		}
		return &Result{Served: true, Digests: []*collect.Digest{d}, Refusals: refusalReading{Counted: true, Blocked: map[string]int64{"p": blocked}}}
	}
	base := mk(1, "no", 0).fingerprint()
	if mk(1, "no", 0).fingerprint() != base {
		t.Error("equal results, different fingerprints")
	}
	for i, other := range []*Result{mk(0, "", 0), mk(1, "other", 0), mk(1, "no", 1)} {
		if other.fingerprint() == base {
			t.Errorf("change %d not seen", i)
		}
	}
}
