package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A NotEnforced declaration is counted in its own phase and not in force; the series are the
// workers' clusters', no more.
func TestPhaseMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clusters := []ClusterPhases{
		{Cluster: "prod-1", Phases: map[policyhubv1.ClusterPhase]int{policyhubv1.ClusterPhaseSynced: 2, policyhubv1.ClusterPhaseNotEnforced: 1}, InForce: 2},
		{Cluster: "prod-2", Phases: map[policyhubv1.ClusterPhase]int{policyhubv1.ClusterPhaseNotEnforced: 3}},
	}
	NewPhases(reg, func() []ClusterPhases { return clusters })
	want := `
# HELP policyhub_cluster_declarations Declarations wanted in a cluster, by their phase there (synced, dry_run, pending, lock_held, unsupported, not_enforced, conflict, failed).
# TYPE policyhub_cluster_declarations gauge
policyhub_cluster_declarations{cluster="prod-1",phase="not_enforced"} 1
policyhub_cluster_declarations{cluster="prod-1",phase="synced"} 2
policyhub_cluster_declarations{cluster="prod-2",phase="not_enforced"} 3
# HELP policyhub_cluster_declarations_in_force Declarations in force in a cluster: synced, and the engine reported them ready. Not enforced, failed or pending ones are not.
# TYPE policyhub_cluster_declarations_in_force gauge
policyhub_cluster_declarations_in_force{cluster="prod-1"} 2
policyhub_cluster_declarations_in_force{cluster="prod-2"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	clusters = clusters[:1]
	if n := testutil.CollectAndCount(reg); n != 3 {
		t.Errorf("after prod-2's worker is gone: %d series, want prod-1's 3", n)
	}
}

// The sync errors counter names the NotEnforced reason apart.
func TestSyncErrorsNotEnforced(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewSync(reg)
	m.Observe(Pass{Cluster: "prod-1", Declarations: []PassDeclaration{{Phase: policyhubv1.ClusterPhaseNotEnforced}}})
	if v := testutil.ToFloat64(m.errors.WithLabelValues("prod-1", "not_enforced")); v != 1 {
		t.Errorf("not_enforced errors = %v, want 1", v)
	}
}
