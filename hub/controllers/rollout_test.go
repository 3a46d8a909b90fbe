package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/rollout"
	"github.com/policyhub/policyhub/hub/work"
)

// Every phase change is an Event, a held gate a Warning; a new version says it started.
func TestRolloutTransitions(t *testing.T) {
	waves := []rollout.Wave{{Name: "staging", Gate: rollout.Gate{MaxFail: 0}}, {Name: "prod"}}
	prev := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}, {Name: "prod", Phase: policyhubv1.WavePending}}}
	next := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{
		{Name: "staging", Phase: policyhubv1.WaveWaiting, Clusters: 1, Fail: 2, Reason: "2 fail results, at most 0 allowed"},
		{Name: "prod", Phase: policyhubv1.WavePending},
	}}
	events := rolloutTransitions(prev, next, waves)
	if len(events) != 1 || events[0].eventType != corev1.EventTypeWarning || events[0].reason != "WaveWaiting" ||
		events[0].message != "wave staging: Auditing -> Waiting (1 clusters): 2 fail results, at most 0 allowed" {
		t.Fatalf("events %+v", events)
	}
	if got := rolloutTransitions(next, next, waves); len(got) != 0 {
		t.Errorf("nothing changed, events %+v", got)
	}
	started := rolloutTransitions(prev, &policyhubv1.RolloutStatus{Revision: "r2", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}}}, waves)
	if len(started) != 2 || started[0].reason != "RolloutStarted" || !strings.Contains(started[0].message, "revision r2 (was r1)") || started[1].reason != "WaveAuditing" {
		t.Errorf("a new revision: events %+v", started)
	}
}

// A wave whose cluster is NotEnforced (its Kyverno does not execute the policy's kind) is never
// Done: the cluster is not in force, and the reason names it; a Synced, in-force one completes.
func TestRolloutWaitsForNotEnforcedCluster(t *testing.T) {
	now := time.Unix(1000, 0)
	plan := &rollout.Plan{Revision: "r1",
		Waves:  []rollout.Wave{{Name: "prod", Clusters: []string{"a", "b"}}},
		States: []rollout.WaveState{{Name: "prod", Phase: rollout.Enforcing, Since: now.Add(-time.Minute)}},
		Modes:  map[string]policyhubv1.Mode{"a": policyhubv1.ModeEnforce, "b": policyhubv1.ModeEnforce}}
	inForce := true
	outcomes := []engine.Outcome{
		{Cluster: "a", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
		{Cluster: "b", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseNotEnforced, InForce: new(bool)}},
	}
	done := func() *policyhubv1.StableVersion { return &policyhubv1.StableVersion{Revision: "r1"} }
	step := stepRollout(plan, outcomes, nil, nil, nil, now, nil, false, nil, done)
	w := step.status.Waves[0]
	if w.Phase != policyhubv1.WaveEnforcing || !strings.Contains(w.Reason, "b") || strings.Contains(w.Reason, "a,") {
		t.Errorf("wave %s (%q), want Enforcing waiting for b", w.Phase, w.Reason)
	}
	outcomes[1].Result = &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}
	if w := stepRollout(plan, outcomes, nil, nil, nil, now, nil, false, nil, done).status.Waves[0]; w.Phase != policyhubv1.WaveDone {
		t.Errorf("every cluster in force: wave %s (%q), want Done", w.Phase, w.Reason)
	}
}

// With replicas sharing the fleet, the replica writing the status reads only its own clusters'
// summaries: a wave gated on legacy objects judges another replica's cluster by the count its
// owner wrote in the cluster's state (recordLegacy), and holds while that cluster has none.
func TestLegacyGateReadsOtherReplicasClusters(t *testing.T) {
	now := time.Unix(1000, 0)
	zero := int64(0)
	plan := &rollout.Plan{Revision: "r1",
		Waves:  []rollout.Wave{{Name: "canary", Clusters: []string{"mine", "theirs"}, Gate: rollout.Gate{MaxLegacyObjects: &zero}}},
		States: []rollout.WaveState{{Name: "canary", Phase: rollout.Auditing, Since: now.Add(-time.Minute), SyncedAt: ptr.To(now.Add(-time.Minute))}},
		Modes:  map[string]policyhubv1.Mode{"mine": policyhubv1.ModeAudit, "theirs": policyhubv1.ModeAudit}}
	inForce, fresh := true, true
	outcomes := []engine.Outcome{
		{Cluster: "mine", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
		{Cluster: "theirs", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
	}
	// The owner of "theirs" wrote its count; "mine" is read here from its summary.
	read := engine.SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{"mine": {}}, Unread: map[string]bool{"theirs": true}}
	two := int64(2)
	clusters := []policyhubv1.ClusterStatus{{Name: "mine", ReportsFresh: &fresh}, {Name: "theirs", ReportsFresh: &fresh, LegacyObjects: &two}}
	legacy := map[string]*int64{"mine": &zero}
	recordLegacy(clusters, read, legacy, true)
	if clusters[0].LegacyObjects == nil || *clusters[0].LegacyObjects != 0 || *clusters[1].LegacyObjects != 2 {
		t.Fatalf("recorded %v and %v, want mine's 0 and theirs kept at 2", clusters[0].LegacyObjects, clusters[1].LegacyObjects)
	}
	done := func() *policyhubv1.StableVersion { return &policyhubv1.StableVersion{Revision: "r1"} }
	w := stepRollout(plan, outcomes, clusters, legacy, nil, now, nil, false, nil, done).status.Waves[0]
	if w.Phase != policyhubv1.WaveWaiting || !strings.Contains(w.Reason, "theirs (2)") || w.LegacyObjects == nil || *w.LegacyObjects != 2 {
		t.Errorf("wave %s (%q, %v), want Waiting on theirs' 2 legacy objects", w.Phase, w.Reason, w.LegacyObjects)
	}
	clusters[1].LegacyObjects = &zero
	if w := stepRollout(plan, outcomes, clusters, legacy, nil, now, nil, false, nil, done).status.Waves[0]; w.Phase == policyhubv1.WaveWaiting {
		t.Errorf("every cluster reports none: wave %s (%q), want it to proceed", w.Phase, w.Reason)
	}
	// A declaration whose rollout has no such gate carries no counts: an inventory's change
	// rewrites none of its slices.
	recordLegacy(clusters, read, legacy, false)
	if clusters[0].LegacyObjects != nil || clusters[1].LegacyObjects != nil {
		t.Errorf("ungated: counts %v, %v kept", clusters[0].LegacyObjects, clusters[1].LegacyObjects)
	}
}
