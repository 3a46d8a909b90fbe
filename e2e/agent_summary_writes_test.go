package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What the agent's writes do on a real hub, with the agent's own identity (its RBAC from
// config/rbac/agent-hub-access): the summary is applied whole once, then its spec is replaced by
// a JSON patch, so what a later summary no longer holds is gone from the hub, and only the agent
// manages it; a summary deleted on the hub is made again, whole, by the next write. The Lease
// says who holds it, for how long and since when, and is the agent's alone.
func TestAgentWritesItsSummaryWholeThenPatchesIt(t *testing.T) {
	const cluster = "cluster-1"
	ctx := testContext(t)
	agentHub, err := client.New(agentHubConfig(t, cluster), client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSummary(t, cluster) })
	deleteSummary(t, cluster)
	admin := directClient(t, fleetOf(t).Hub.Config)
	p, err := push.New(agentHub, push.Options{Cluster: cluster, Interval: time.Second, Heartbeat: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	policy := func(name string, pass, fail int64) policyhubv1.PolicySummary {
		return policyhubv1.PolicySummary{Name: name, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: pass, Fail: fail}}
	}
	write := func(spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
		t.Helper()
		if err := p.Write(ctx, spec, time.Now()); err != nil {
			t.Fatalf("write %s: %v", spec.ContentHash, err)
		}
		s, err := hubSummary(ctx, admin, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.ContentHash != spec.ContentHash || len(s.Spec.Policies) != len(spec.Policies) || s.Spec.Totals != spec.Totals {
			t.Fatalf("the hub holds %q with %d policies and totals %+v, want %q with %d and %+v",
				s.Spec.ContentHash, len(s.Spec.Policies), s.Spec.Totals, spec.ContentHash, len(spec.Policies), spec.Totals)
		}
		for _, m := range s.ManagedFields {
			if m.Manager != push.FieldManager {
				t.Errorf("%s manages %s of the summary: only %s may", m.Manager, m.Subresource, push.FieldManager)
			}
		}
		return s
	}
	operations := func(s *policyhubv1.PolicyReportSummary) map[metav1.ManagedFieldsOperationType]bool {
		ops := map[metav1.ManagedFieldsOperationType]bool{}
		for _, m := range s.ManagedFields {
			if m.Subresource == "" {
				ops[m.Operation] = true
			}
		}
		return ops
	}

	first := write(policyhubv1.PolicyReportSummarySpec{ContentHash: "one", Totals: policyhubv1.ResultCounts{Pass: 2, Fail: 1},
		Policies: []policyhubv1.PolicySummary{policy("a", 0, 1), policy("b", 2, 0)}})
	if ops := operations(first); !ops[metav1.ManagedFieldsOperationApply] || ops[metav1.ManagedFieldsOperationUpdate] {
		t.Errorf("the first write: operations %v, want a server-side apply only", ops)
	}
	second := write(policyhubv1.PolicyReportSummarySpec{ContentHash: "two", Totals: policyhubv1.ResultCounts{Pass: 3},
		Policies: []policyhubv1.PolicySummary{policy("b", 3, 0)}})
	if ops := operations(second); !ops[metav1.ManagedFieldsOperationUpdate] {
		t.Errorf("the second write: operations %v, want the patch (an update) there", ops)
	}
	if second.Spec.Policies[0].Name != "b" || second.Spec.Policies[0].Results.Fail != 0 {
		t.Errorf("policies %+v: want b alone, a gone with its failure", second.Spec.Policies)
	}
	if second.UID != first.UID || second.Generation != first.Generation+1 {
		t.Errorf("uid %s generation %d after uid %s generation %d: want the same summary, one generation on", second.UID, second.Generation, first.UID, first.Generation)
	}

	if err := admin.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	third := write(policyhubv1.PolicyReportSummarySpec{ContentHash: "three", Totals: policyhubv1.ResultCounts{Pass: 1},
		Policies: []policyhubv1.PolicySummary{policy("c", 1, 0)}})
	if third.UID == second.UID {
		t.Error("the summary deleted on the hub was not made again")
	}
	if ops := operations(third); !ops[metav1.ManagedFieldsOperationApply] {
		t.Errorf("the summary made again: operations %v, want it applied whole", ops)
	}

	// The Lease, renewed by the same agent identity.
	renewCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.RenewLease(renewCtx) }()
	defer func() { stop(); <-done }()
	lease := &coordinationv1.Lease{}
	eventually(t, 30*time.Second, 100*time.Millisecond, "the agent's Lease on the hub", func() error {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: cluster, Name: push.LeaseName}, lease); err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil {
			return fmt.Errorf("not renewed: %+v", lease.Spec)
		}
		return nil
	})
	if h := lease.Spec.HolderIdentity; h == nil || *h != cluster {
		t.Errorf("holderIdentity %v, want %s", h, cluster)
	}
	if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 180 {
		t.Errorf("leaseDurationSeconds %v, want 180 (3 × 1m)", d)
	}
	if age := time.Since(lease.Spec.RenewTime.Time); age < -time.Minute || age > time.Minute {
		t.Errorf("renewTime %s, want about now", lease.Spec.RenewTime)
	}
	for _, m := range lease.ManagedFields {
		if m.Manager != push.FieldManager {
			t.Errorf("%s manages the Lease: only %s may", m.Manager, push.FieldManager)
		}
	}
}
