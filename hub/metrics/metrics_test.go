package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestSyncMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewSync(reg)
	m.Observe(Pass{Cluster: "prod-1", Duration: 40 * time.Millisecond, Declarations: []PassDeclaration{
		{Phase: policyhubv1.ClusterPhaseSynced, Actions: policyhubv1.ActionCounts{Created: 2, Unchanged: 1}},
		{Phase: policyhubv1.ClusterPhaseLockHeld},
		{Phase: policyhubv1.ClusterPhaseConflict, Actions: policyhubv1.ActionCounts{Conflict: 1}},
	}})
	m.Observe(Pass{Cluster: "prod-2", Unreachable: true})

	want := `
# HELP policyhub_cluster_reachable 1 when the last sync could read the cluster through the gateway, 0 when it could not.
# TYPE policyhub_cluster_reachable gauge
policyhub_cluster_reachable{cluster="prod-1"} 1
policyhub_cluster_reachable{cluster="prod-2"} 0
# HELP policyhub_sync_errors_total Declarations not synced in a cluster, by reason (failed, conflict, unsupported, not_enforced, lock_held, unreachable).
# TYPE policyhub_sync_errors_total counter
policyhub_sync_errors_total{cluster="prod-1",reason="conflict"} 1
policyhub_sync_errors_total{cluster="prod-1",reason="lock_held"} 1
policyhub_sync_errors_total{cluster="prod-2",reason="unreachable"} 1
# HELP policyhub_sync_operations_total Objects handled by syncs, by cluster and action (created, updated, unchanged, deleted, conflict, failed).
# TYPE policyhub_sync_operations_total counter
policyhub_sync_operations_total{action="conflict",cluster="prod-1"} 1
policyhub_sync_operations_total{action="created",cluster="prod-1"} 2
policyhub_sync_operations_total{action="unchanged",cluster="prod-1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_cluster_reachable", "policyhub_sync_errors_total", "policyhub_sync_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "policyhub_sync_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2 (one per cluster)", n)
	}

	m.ForgetCluster("prod-1")
	if n := testutil.CollectAndCount(reg); n != 3 {
		t.Errorf("after forgetting prod-1: %d series, want prod-2's 3", n)
	}
}
