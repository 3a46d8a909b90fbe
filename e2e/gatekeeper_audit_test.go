package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// A Gatekeeper declaration in Audit: the hub ships the Constraint as warn, so a violating
// Deployment is admitted; Gatekeeper's audit finds it and the one that was there before, and the
// count Gatekeeper itself stores in the Constraint's status.totalViolations (read here from the
// cluster) is the FleetPolicy's fail in that cluster and the hub's policyhub_policy_results; the
// agent's summary names the engine and lists the violations with Gatekeeper's message; what
// Gatekeeper writes into its objects is never taken for drift.
func TestGatekeeperAuditResultsReachStatusAndMetrics(t *testing.T) {
	inParallel(t)
	hub := startHub(t, time.Hour)
	startAgent(t, gatekeeperCluster)
	ctx := testContext(t)
	const ns, kind, name = "gk-audit", "E2eAuditTeam", "gk-audit-team"
	cfg := fleetOf(t).Cluster(gatekeeperCluster).Config
	c4 := directClient(t, cfg)
	createNamespace(ctx, t, c4, ns)
	// A violator from before any policy: only the audit can find it.
	if err := c4.Create(ctx, shopDeployment(ns, "legacy", "")); err != nil {
		t.Fatal(err)
	}

	createFleetPolicy(t, gatekeeperRegoTemplate("gk-audit-template", kind))
	createFleetPolicy(t, gatekeeperConstraint(name, "Audit", kind, ns))
	// After the declarations: cleanups run last first, so this logs before they are deleted.
	logGatekeeperOnFailure(t, kind)
	for _, fp := range []string{"gk-audit-template", name} {
		waitFleetPolicy(t, fp, "synced and in force in "+gatekeeperCluster, allInForce)
	}
	live, err := constraint(ctx, directClient(t, cfg), kind, name)
	if err != nil {
		t.Fatal(err)
	}
	if action, _, _ := unstructured.NestedString(live.Object, "spec", "enforcementAction"); action != "warn" {
		t.Fatalf("enforcementAction %q, want warn (Audit)", action)
	}
	if err := c4.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatalf("Audit (warn) must admit the Deployment: %v", err)
	}

	// Gatekeeper's count, read from the cluster, is the declaration's fail and the hub's series.
	var total int64
	waitResults(t, name, "the FleetPolicy's fail in "+gatekeeperCluster+" is the Constraint's totalViolations (≥ 2)", func(fp *fleetView) error {
		live, err := constraint(ctx, directClient(t, cfg), kind, name)
		if err != nil {
			return err
		}
		total, _, _ = unstructured.NestedInt64(live.Object, "status", "totalViolations")
		if total < 2 {
			return fmt.Errorf("Gatekeeper's audit counts %d violations, want both Deployments", total)
		}
		s := clusterStatus(fp, gatekeeperCluster)
		if s == nil || s.Results == nil || int64(s.Results.Fail) != total || s.Results.Pass != 0 {
			return fmt.Errorf("%s: %+v; want fail %d and no pass (Gatekeeper counts none)", gatekeeperCluster, s, total)
		}
		return nil
	})
	t.Logf("Gatekeeper's audit: %d violations of %s", total, name)
	series := map[string]string{"cluster": gatekeeperCluster, "policy": name, "kind": kind, "result": "fail"}
	eventually(t, 30*time.Second, 500*time.Millisecond, "the hub's policyhub_policy_results is the Constraint's totalViolations", func() error {
		if v, ok := hub.scrape(t, "policyhub_policy_results", series); !ok || int64(v) != total {
			return fmt.Errorf("series %v (present %v), want %d", v, ok, total)
		}
		return nil
	})

	summary, err := hubSummaryOf(t, gatekeeperCluster)
	if err != nil {
		t.Fatal(err)
	}
	if e := summary.Spec.Engine; !slices.Contains(e.Engines, policyhubv1.EngineGatekeeper) || e.Gatekeeper == nil || !e.Gatekeeper.Webhook ||
		e.Gatekeeper.Version != fleet.GatekeeperVersion || e.KyvernoWebhooks {
		t.Errorf("engine %+v (gatekeeper %+v): want Gatekeeper %s with its webhook, no Kyverno", e, e.Gatekeeper, fleet.GatekeeperVersion)
	}
	i := slices.IndexFunc(summary.Spec.Policies, func(p policyhubv1.PolicySummary) bool { return p.Name == name && p.Kind == kind })
	if i < 0 || summary.Spec.Policies[i].Engine != policyhubv1.EngineGatekeeper {
		t.Errorf("the summary's policies %+v: want %s %s of engine Gatekeeper", summary.Spec.Policies, kind, name)
	}
	listed := slices.ContainsFunc(summary.Spec.Violations, func(v policyhubv1.Violation) bool {
		return v.Policy == name && v.Resource.Kind == "Deployment" && v.Resource.Name == "legacy" && strings.Contains(v.Message, `you must provide labels: {"team"}`)
	})
	if !listed {
		t.Errorf("the summary's violations %+v: want legacy's, with Gatekeeper's message", summary.Spec.Violations)
	}
	// Gatekeeper wrote the template's and the Constraint's status many times meanwhile (each a
	// change the hub's watch sees): none of it is drift, so nothing was written again.
	if n := hub.syncOps(t, gatekeeperCluster, "updated"); n != 0 {
		t.Errorf("the hub updated objects in %s %v times: Gatekeeper's own writes taken for drift", gatekeeperCluster, n)
	}
}
