package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A ValidatingAdmissionPolicy FleetPolicy in Audit on cluster-1: the API server admits a
// violating Deployment, and the agent's background evaluation (the API server's own admission
// code) reports the existing violators: the FleetPolicy's results in cluster-1 equal an
// evaluation the test makes itself of every Deployment there; the summary names the policy's
// engine Kubernetes, the API server's message and the application. In Enforce, the API
// server's refusal is counted as blocked (the fleet's agent reads /metrics as the fleet's admin).
func TestValidatingAdmissionPolicyResultsFromTheAgent(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, name = "vap-results", "vap-results"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	// Resources that exist before the policy: the API server never judges them.
	for i, team := range []string{"", "checkout", "", "payments", ""} {
		if err := c1.Create(ctx, shopDeployment(ns, fmt.Sprintf("before-%d", i), team)); err != nil {
			t.Fatal(err)
		}
	}
	createFleetPolicy(t, vapTeamPolicy(name, "Audit", "cluster-1", ns))
	waitFleetPolicy(t, name, "synced in cluster-1", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	eventually(t, 30*time.Second, 500*time.Millisecond, "Audit: the API server admits a Deployment without a team", func() error {
		return client.IgnoreAlreadyExists(c1.Create(ctx, shopDeployment(ns, "late", "")))
	})

	// The test's own evaluation of the policy's expression, over every Deployment there.
	var pass, fail int64
	var deps appsv1.DeploymentList
	if err := c1.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		if _, ok := d.Labels["team"]; ok {
			pass++
		} else {
			fail++
		}
	}
	if pass != 2 || fail != 4 {
		t.Fatalf("the test's own evaluation: pass %d, fail %d; want 2, 4 (the Deployments it made)", pass, fail)
	}
	waitResults(t, name, fmt.Sprintf("cluster-1's results equal the test's evaluation (pass %d, fail %d)", pass, fail), func(fp *fleetView) error {
		s1 := clusterStatus(fp, "cluster-1")
		if s1 == nil || s1.Results == nil || s1.Results.Pass != pass || s1.Results.Fail != fail || s1.Results.Error != 0 {
			return fmt.Errorf("cluster-1: %+v", s1)
		}
		return nil
	})

	// The summary says what the API server would say, of which application.
	s, err := hubSummaryOf(t, "cluster-1")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Spec.Policies, func(p policyhubv1.PolicySummary) bool { return p.Name == name })
	if i < 0 || s.Spec.Policies[i].Engine != policyhubv1.EngineKubernetes || s.Spec.Policies[i].Kind != "ValidatingAdmissionPolicy" {
		t.Errorf("the summary's policy %s: %+v; want engine Kubernetes, kind ValidatingAdmissionPolicy", name, s.Spec.Policies)
	}
	wantMessage := "ValidatingAdmissionPolicy '" + name + "' with binding '" + name + "' denied request: Deployments need a team label"
	var messages []string
	for _, v := range s.Spec.Violations {
		if v.Policy == name {
			messages = append(messages, v.Message)
			if v.Message != wantMessage || v.Resource.Kind != "Deployment" || v.Resource.Namespace != ns {
				t.Errorf("violation %+v; want the API server's message %q of a Deployment in %s", v, wantMessage, ns)
			}
		}
	}
	if len(messages) == 0 {
		t.Errorf("no violation of %s in the summary: %+v", name, s.Spec.Violations)
	}
	if !slices.ContainsFunc(s.Spec.Applications, func(a policyhubv1.ApplicationSummary) bool {
		return a.Namespace == ns && a.Name == "shop" && a.Policy == name && a.Results.Fail == fail
	}) {
		t.Errorf("application shop's results of %s: %+v", name, s.Spec.Applications)
	}
	e := s.Spec.Engine
	if !slices.Contains(e.Engines, policyhubv1.EngineKubernetes) || e.AdmissionPolicies == nil || !e.AdmissionPolicies.Evaluated {
		t.Errorf("engine facts %+v: want Kubernetes among the engines, admission policies evaluated", e)
	}

	// Enforce: the API server refuses, and the refusal is counted where /metrics is readable.
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { enforce := policyhubv1.ModeEnforce; fp.Spec.Mode = &enforce })
	eventually(t, 30*time.Second, 500*time.Millisecond, "Enforce: the API server refuses a Deployment without a team", func() error {
		err := c1.Create(ctx, shopDeployment(ns, "refused", ""))
		if err == nil { // admitted before the binding's Deny took effect: again
			if err := c1.Delete(ctx, shopDeployment(ns, "refused", "")); client.IgnoreNotFound(err) != nil {
				return err
			}
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), wantMessage) {
			return fmt.Errorf("refused without the API server's message: %v", err)
		}
		return nil
	})
	if s, err := hubSummaryOf(t, "cluster-1"); err != nil || s.Spec.Engine.AdmissionPolicies == nil || s.Spec.Engine.AdmissionPolicies.RefusalsCounted == nil ||
		!*s.Spec.Engine.AdmissionPolicies.RefusalsCounted {
		t.Fatalf("the fleet's agent reads /metrics as the fleet's admin: refusals must be counted (%v): %+v", err, s.Spec.Engine.AdmissionPolicies)
	}
	waitResults(t, name, "cluster-1's refusal counted as blocked", func(fp *fleetView) error {
		if s1 := clusterStatus(fp, "cluster-1"); s1 == nil || s1.Blocked < 1 {
			return fmt.Errorf("cluster-1: %+v", s1)
		}
		return nil
	})
}
