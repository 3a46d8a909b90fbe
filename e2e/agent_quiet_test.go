package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// A quiet cluster costs the hub nothing: its agent, heartbeating every second with nothing new
// to say, renews its Lease and rewrites neither its summary nor anything the hub derives from it.
// Counted on the hub kube-apiserver's own request metrics over a window of at least five
// renewals: no FleetPolicy status write, no summary write, no summary status write, no Event.
// And the agent's results reach the status without the FleetPolicy being placed or rendered
// again: the status half takes them in (the hub's policyhub_declaration_renders_total).
func TestQuietAgentWritesNothingOnTheHub(t *testing.T) {
	h := startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "agent-quiet", "agent-quiet-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1"))
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	rendersSynced := h.renders(t, policyhubv1.KindFleetPolicy)
	if rendersSynced < 1 {
		t.Fatalf("%v renderings counted for a synced FleetPolicy: the count is broken", rendersSynced)
	}
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	startAgentBeating(t, "cluster-1", time.Second)
	waitResults(t, name, "cluster-1's failure, fresh", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-1"); s == nil || s.Results == nil || s.Results.Fail < 1 || s.Stale {
			return fmt.Errorf("cluster-1: %+v", s)
		}
		return nil
	})

	hub := directClient(t, fleetOf(t).Hub.Config)
	leaseKey := client.ObjectKey{Namespace: "cluster-1", Name: policyhubv1.AgentLeaseName}
	summaryKey := client.ObjectKey{Namespace: "cluster-1", Name: policyhubv1.SummaryName}
	// A window counts only if the summary's content did not change in it (Kyverno may still be
	// reporting when the test starts; a change is rightly written). Five renewals a window.
	var got map[string]float64
	var statusDiff string
	eventually(t, 90*time.Second, 100*time.Millisecond, "a window of five Lease renewals with an unchanged summary", func() error {
		summary := &policyhubv1.PolicyReportSummary{}
		if err := hub.Get(ctx, summaryKey, summary); err != nil {
			return err
		}
		fpBefore, err := fleetPolicyWithClusters(ctx, hub, name)
		if err != nil {
			return err
		}
		// Settled first: the hub has observed the summary...
		observed := summary.Status.ObservedTime
		if summary.Status.ObservedGeneration != summary.Generation || observed == nil {
			return fmt.Errorf("the hub has not observed the summary's generation %d yet", summary.Generation)
		}
		// ...and has had the time to take it in: its summary events wait 500 ms, the test hub's
		// status a second (a pass count moving alone rewrites nothing, so no write marks it).
		if age := time.Since(observed.Time); age < 3*time.Second {
			return fmt.Errorf("the summary was observed %s ago: the hub may still be taking it in", age)
		}
		before := hubWrites(t)
		renewals := 0
		lease := &coordinationv1.Lease{}
		if err := hub.Get(ctx, leaseKey, lease); err != nil {
			return fmt.Errorf("the agent's Lease: %w", err)
		}
		last := lease.ResourceVersion
		eventually(t, 30*time.Second, 100*time.Millisecond, "five Lease renewals", func() error {
			if err := hub.Get(ctx, leaseKey, lease); err != nil {
				return err
			}
			if lease.ResourceVersion != last {
				renewals, last = renewals+1, lease.ResourceVersion
			}
			if renewals < 5 {
				return fmt.Errorf("%d renewals", renewals)
			}
			return nil
		})
		after := &policyhubv1.PolicyReportSummary{}
		if err := hub.Get(ctx, summaryKey, after); err != nil {
			return err
		}
		got = writesBetween(before, hubWrites(t))
		if after.Spec.ContentHash != summary.Spec.ContentHash {
			return fmt.Errorf("the summary's content changed in the window (%s to %s): try another", summary.Spec.ContentHash, after.Spec.ContentHash)
		}
		fpAfter, err := fleetPolicyWithClusters(ctx, hub, name)
		if err != nil {
			return err
		}
		// The cluster's sync may still be settling (Kyverno confirming the policy in force): a
		// change of anything but what a heartbeat used to move (the report time, staleness) is
		// not a heartbeat's doing. What a heartbeat moved fails the test below.
		statusDiff = fmt.Sprintf("resourceVersion %s to %s\n%s\n%s", fpBefore.ResourceVersion, fpAfter.ResourceVersion,
			cmp.Diff(fpBefore.Status, fpAfter.Status), cmp.Diff(fpBefore.Clusters, fpAfter.Clusters))
		if diff := cmp.Diff(heartbeatBlind(fpBefore), heartbeatBlind(fpAfter)); diff != "" {
			return fmt.Errorf("the FleetPolicy's status changed in the window for another reason (-before +after):\n%s", diff)
		}
		return nil
	})
	t.Logf("hub writes in a window of five renewals: %v", got)
	if n := h.renders(t, policyhubv1.KindFleetPolicy); n != rendersSynced {
		t.Errorf("the FleetPolicy was rendered %v times while only the agent's results and heartbeats came: want none (status half only)", n-rendersSynced)
	}
	// The count sees writes at all: the five renewals are Lease writes (with the apiserver's own).
	if got["leases"] < 5 {
		t.Errorf("%v Lease writes counted in a window of five renewals: the count of writes is broken", got["leases"])
	}
	if got["fleetpolicies/status"] != 0 || got["clusterstatusslices"] != 0 {
		t.Logf("the FleetPolicy's status and per-cluster state in the window (-before +after):\n%s", statusDiff)
	}
	for _, resource := range []string{"fleetpolicies/status", "clusterstatusslices", "policyreportsummaries", "policyreportsummaries/status", "events"} {
		if got[resource] != 0 {
			t.Errorf("%v writes of %s while only heartbeats came: want none", got[resource], resource)
		}
	}
}

// heartbeatBlind is a FleetPolicy's status and per-cluster state without what heartbeats moved
// before agents renewed Leases: each cluster's report time and staleness.
func heartbeatBlind(fp *fleetView) fleetView {
	blind := fleetView{FleetPolicy: &policyhubv1.FleetPolicy{Status: *fp.Status.DeepCopy()}}
	for _, c := range fp.Clusters {
		c.ReportTime, c.Stale = nil, false
		blind.Clusters = append(blind.Clusters, c)
	}
	blind.Status.Summary.Stale = 0
	return blind
}

// hubWrites counts the mutating requests the hub's kube-apiserver has served so far, by resource
// ("resource" or "resource/subresource"), from its apiserver_request_total.
func hubWrites(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := scrapeKubeAPIServer(testContext(t), fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatalf("the hub kube-apiserver's /metrics: %v", err)
	}
	out := map[string]float64{}
	f := families["apiserver_request_total"]
	if f == nil {
		t.Fatal("the hub kube-apiserver serves no apiserver_request_total")
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		if labels["dry_run"] != "" {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out
}

// writesBetween is how much each count of hubWrites grew from before to after.
func writesBetween(before, after map[string]float64) map[string]float64 {
	out := maps.Clone(after)
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// scrapeKubeAPIServer reads a kube-apiserver's /metrics with cfg's credentials.
func scrapeKubeAPIServer(ctx context.Context, cfg *rest.Config) (map[string]*dto.MetricFamily, error) {
	body, err := fleet.APIServerMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(body)
}
