package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// teamLabelPolicy is a FleetPolicy requiring a team label on the Deployments of namespace ns, in
// the given clusters and mode.
func teamLabelPolicy(name, ns, mode string, clusters ...string) string {
	return fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata: {name: %s}
spec:
  mode: %s
  placement: {clusters: [%s]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    metadata:
      annotations: {policies.kyverno.io/severity: high, policies.kyverno.io/category: Ownership}
    spec:
      background: true
      rules:
      - name: need-team
        match:
          any:
          - resources:
              kinds: [Deployment]
              namespaces: [%s]
        validate:
          message: "Deployments need a team label"
          pattern:
            metadata:
              labels:
                team: "?*"
`, name, mode, strings.Join(clusters, ", "), ns)
}

// shopDeployment is a Deployment of application shop; team, when set, satisfies teamLabelPolicy.
func shopDeployment(ns, name, team string) *appsv1.Deployment {
	labels := map[string]string{"app.oam.dev/name": "shop", "app": name}
	if team != "" {
		labels["team"] = team
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

// waitRefused creates shop's web Deployment (no team label) in cluster until Kyverno refuses it
// with message: its webhook may take a moment to pick up a new policy. An admitted one is
// deleted again, so the loop ends at the first refusal.
func waitRefused(t *testing.T, cluster, ns, message string) {
	t.Helper()
	ctx := testContext(t)
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	eventually(t, 60*time.Second, time.Second, "Kyverno refuses shop's Deployment in "+cluster, func() error {
		err := c.Create(ctx, shopDeployment(ns, "web", ""))
		if err == nil {
			_ = c.Delete(ctx, shopDeployment(ns, "web", ""))
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), message) {
			return fmt.Errorf("refused without the policy's message: %v", err)
		}
		return nil
	})
}

// An Audit FleetPolicy and a violating Deployment of app shop in cluster 1: the FleetPolicy's
// status shows the failure for cluster 1 and none for cluster 2, and so does the hub's /metrics;
// fixing the Deployment brings both back to 0.
func TestAgentAuditResultsInStatusAndMetrics(t *testing.T) {
	inParallel(t)
	hub := startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "agent-audit", "agent-audit-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-2").Config), ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1", "cluster-2"))
	waitFleetPolicy(t, name, "synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))

	deploy := shopDeployment(ns, "web", "")
	if err := c1.Create(ctx, deploy); err != nil {
		t.Fatalf("Audit mode must let the Deployment in: %v", err)
	}
	waitResults(t, name, "fail ≥ 1 in cluster-1, a summary with 0 fail in cluster-2", func(fp *fleetView) error {
		s1, s2 := clusterStatus(fp, "cluster-1"), clusterStatus(fp, "cluster-2")
		switch {
		case s1 == nil || s1.Results == nil || s1.Results.Fail < 1:
			return fmt.Errorf("cluster-1: %+v", s1)
		case s2 == nil || s2.Results == nil || s2.Results.Fail != 0:
			return fmt.Errorf("cluster-2: %+v", s2)
		case fp.Status.Summary.Violations < 1:
			return fmt.Errorf("summary %+v", fp.Status.Summary)
		case s1.ReportTime == nil || s1.Stale:
			return fmt.Errorf("cluster-1 report time %v, stale %v", s1.ReportTime, s1.Stale)
		}
		return nil
	})
	policySeries := func(cluster string) map[string]string {
		return map[string]string{"cluster": cluster, "policy": name, "kind": "ClusterPolicy", "result": "fail", "severity": "high", "category": "Ownership"}
	}
	eventually(t, 30*time.Second, 500*time.Millisecond, "violation series on the hub's /metrics", func() error {
		if v, ok := hub.scrape(t, "policyhub_policy_results", policySeries("cluster-1")); !ok || v < 1 {
			return fmt.Errorf("cluster-1 fail series %v (present %v)", v, ok)
		}
		if v, ok := hub.scrape(t, "policyhub_application_results", map[string]string{"cluster": "cluster-1", "app_namespace": ns, "application": "shop", "result": "fail"}); !ok || v < 1 {
			return fmt.Errorf("cluster-1 shop fail series %v (present %v)", v, ok)
		}
		// cluster-2 has nothing the policy applies to: no results, so no series (or a 0).
		if v, ok := hub.scrape(t, "policyhub_policy_results", policySeries("cluster-2")); ok && v != 0 {
			return fmt.Errorf("cluster-2 fail series %v, want none or 0", v)
		}
		return nil
	})

	// Fix the Deployment: Kyverno reports pass, and the failure goes away everywhere.
	if err := c1.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
		t.Fatal(err)
	}
	deploy.Labels["team"] = "checkout"
	if err := c1.Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	waitResults(t, name, "cluster-1 back to 0 fail", func(fp *fleetView) error {
		if s1 := clusterStatus(fp, "cluster-1"); s1 == nil || s1.Results == nil || s1.Results.Fail != 0 || s1.Results.Pass < 1 {
			return fmt.Errorf("cluster-1: %+v", s1)
		}
		return nil
	})
	eventually(t, 30*time.Second, 500*time.Millisecond, "the fail series follows to 0", func() error {
		if v, ok := hub.scrape(t, "policyhub_policy_results", policySeries("cluster-1")); !ok || v != 0 {
			return fmt.Errorf("cluster-1 fail series %v (present %v)", v, ok)
		}
		return nil
	})
}
