package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The three kyverno/policies best-practices policies, running as legacy ClusterPolicies in
// Enforce on a fleet with real violations (one Deployment violating each, one violating none),
// converted to ValidatingPolicies: each conversion runs as a shadow until it judges every
// resource of a wave like the legacy policy, then swaps wave by wave (staging, then prod) — the
// ValidatingPolicy in Enforce beside the ClusterPolicy, the ClusterPolicy removed once the
// ValidatingPolicy is in force — while Deployments violating each policy are refused in both
// clusters at every moment (server-side dry-runs, every 100 ms).
func TestSwapToCELWithParityWaveByWave(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns = "swap-cel"
	clusters := []string{"cluster-1", "cluster-2"}
	for _, cluster := range clusters {
		c := directClient(t, fleetOf(t).Cluster(cluster).Config)
		createNamespace(ctx, t, c, ns)
		for _, d := range []*appsv1.Deployment{
			podDeployment(ns, "good", "nginx:1.27", true, true),
			podDeployment(ns, "latest", "nginx:latest", true, true),
			podDeployment(ns, "no-probes", "nginx:1.27", false, true),
			podDeployment(ns, "no-limits", "nginx:1.27", true, false),
		} {
			if err := c.Create(ctx, d); err != nil {
				t.Fatalf("%s: create %s before the policies: %v", cluster, d.Name, err)
			}
		}
	}
	policies := map[string]string{ // FleetPolicy (and policy) name → kyverno/policies file
		"swap-latest-tag": "disallow-latest-tag",
		"swap-probes":     "require-probes",
		"swap-limits":     "require-pod-requests-limits",
	}
	legacy := map[string]string{}
	for name, file := range policies {
		policy := bestPractice(t, file, name, ns)
		createSwappable(t, name, policy, 0)
		legacy[name] = file
	}
	for name := range policies {
		waitSwapped(t, name, "the legacy version in Enforce everywhere")
	}
	watch := watchRefusals(t, clusters, map[string]*appsv1.Deployment{
		"swap-latest-tag": podDeployment(ns, "probe-latest", "nginx:latest", true, true),
		"swap-probes":     podDeployment(ns, "probe-no-probes", "nginx:1.27", false, true),
		"swap-limits":     podDeployment(ns, "probe-no-limits", "nginx:1.27", true, false),
	})
	defer watch.end()

	for name, file := range policies {
		swapTo(t, name, converted(t, bestPractice(t, file, name, ns)))
	}
	// Parity is measured before any wave swaps: the preview of each conversion, complete in
	// both clusters, judges every resource alike.
	for name := range policies {
		waitResults(t, name, "parity in both clusters before the swap", func(fp *fleetView) error {
			if st := fp.Status.Rollout; st != nil && st.Stable != nil && st.Stable.Revision == st.Revision {
				return nil // already swapped: parity was what let it (the waves below say so)
			}
			p := fp.Status.Preview
			if p == nil || p.Reported < 1 {
				return fmt.Errorf("preview %+v, waves %s", p, wavePhases(fp))
			}
			if p.Differ != 0 || p.OnlyShadow != 0 || p.OnlyLive != 0 {
				return fmt.Errorf("not alike: %+v", p)
			}
			return nil
		})
	}
	for name := range policies {
		fp := waitSwapped(t, name, "the conversion swapped in, wave by wave")
		if fp.Status.Rollout.Stable.Template.Kind != "ValidatingPolicy" {
			t.Errorf("%s: stable version %s, want the ValidatingPolicy", name, fp.Status.Rollout.Stable.Template.Kind)
		}
		for _, cluster := range clusters {
			eventually(t, 30*time.Second, 200*time.Millisecond, name+" swapped in "+cluster, func() error {
				if policyIn(t, cluster, clusterPolicyGVK, name) != nil {
					return fmt.Errorf("the ClusterPolicy is still there")
				}
				if policyIn(t, cluster, clusterPolicyGVK, policyhubv1.ShadowName(name)) != nil || policyIn(t, cluster, validatingPolicyGVK, policyhubv1.ShadowName(name)) != nil {
					return fmt.Errorf("a shadow is still there")
				}
				vp := policyIn(t, cluster, validatingPolicyGVK, name)
				if vp == nil {
					return fmt.Errorf("no ValidatingPolicy")
				}
				if actions, _, _ := unstructuredStrings(vp, "spec", "validationActions"); len(actions) != 1 || actions[0] != "Deny" {
					return fmt.Errorf("validationActions %v, want [Deny]", actions)
				}
				return nil
			})
		}
	}
	tries, admitted := watch.end()
	if len(admitted) > 0 {
		t.Errorf("during the swap Kyverno admitted %d of %d violating dry-runs: %v", len(admitted), tries, admitted)
	}
	if tries < 30 {
		t.Errorf("only %d dry-runs during the swap: the watch proves little", tries)
	}
}
