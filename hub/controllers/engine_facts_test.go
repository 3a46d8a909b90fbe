package controllers

import (
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster's worker is handed a pass when its Kyverno version changes, and only then; the facts
// go with the cluster's summary.
func TestEngineFactsChanges(t *testing.T) {
	var changed []string
	e := NewEngineFacts()
	e.Changed = func(cluster string) { changed = append(changed, cluster) }
	spec := func(version string) *policyhubv1.PolicyReportSummarySpec {
		s := &policyhubv1.PolicyReportSummarySpec{}
		if version != "" {
			s.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: version}
		}
		return s
	}
	e.Set("c1", spec(""))        // no facts, none before: nothing changed
	e.Set("c1", spec("v1.19.1")) // changed
	e.Set("c1", spec("v1.19.1")) // the same
	e.Set("c2", spec("v1.20.0")) // changed
	e.Set("c1", spec("v1.20.0")) // changed
	if got := e.KyvernoVersion("c1"); got != "v1.20.0" {
		t.Errorf("c1's version %q", got)
	}
	e.Forget("c2") // changed: unknown now
	e.Forget("c2") // the same
	if got := e.KyvernoVersion("c2"); got != "" {
		t.Errorf("c2's version %q after Forget", got)
	}
	want := []string{"c1", "c2", "c1", "c2"}
	if len(changed) != len(want) {
		t.Fatalf("changes %v, want %v", changed, want)
	}
	for i := range want {
		if changed[i] != want[i] {
			t.Fatalf("changes %v, want %v", changed, want)
		}
	}
	if len(e.versions) != 1 {
		t.Errorf("facts kept for %d clusters, want 1", len(e.versions))
	}
}
