package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A PolicySet migrating member by member (a legacy ClusterPolicy beside a ValidatingPolicy) on a
// cluster whose Kyverno says 1.20: the set is NotEnforced there, naming the legacy member and
// saying its other members are kept in step; a change of the ValidatingPolicy still reaches that
// cluster, while the legacy ClusterPolicy already there is left as it was (neither rewritten nor
// pruned). Once the cluster says 1.19 again, the set is Synced there as in the other cluster.
func TestHubNotEnforcedMixedSetKeepsItsCELMembersInStep(t *testing.T) {
	startHub(t, time.Hour)
	ctx := context.Background()
	const ns, name = "not-enforced-mixed", "e2e-not-enforced-mixed"
	const legacyName, celName = "mixed-legacy-latest", "mixed-cel-team"
	cluster2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-1").Config), ns)
	createNamespace(ctx, t, cluster2, ns)
	versions := &kyvernoVersions{t: t, started: map[string]bool{}}
	versions.set("cluster-2", "v1.19.1")

	legacy := latestTagPolicy(t, legacyName, ns, "Audit")
	celSpec := func(message string) []byte {
		spec := teamConfigMapPolicySpec("Audit", ns)
		spec["validations"].([]any)[0].(map[string]any)["message"] = message
		return marshalJSON(spec)
	}
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  source:
    inline:
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: %s}
      spec: %s
    - apiVersion: policies.kyverno.io/v1
      kind: ValidatingPolicy
      metadata: {name: %s}
      spec: %s
`, name, legacyName, marshalJSON(legacy.Object["spec"]), celName, celSpec("ConfigMaps need a team label")))
	bothSynced := func(s *setView) error {
		for _, c := range s.Clusters {
			if c.Phase != policyhubv1.ClusterPhaseSynced || c.InForce == nil || !*c.InForce {
				return fmt.Errorf("cluster %s: %s (%s), in force %v", c.Name, c.Phase, c.Message, c.InForce)
			}
		}
		if len(s.Clusters) != 2 {
			return fmt.Errorf("%d clusters in status", len(s.Clusters))
		}
		return nil
	}
	waitPolicySet(t, name, "both members in force in both clusters", bothSynced)
	before := clusterPolicy(t, "cluster-2", legacyName)
	if before == nil {
		t.Fatal("the legacy member is not in cluster-2")
	}

	versions.set("cluster-2", "v1.20.0")
	set := waitPolicySet(t, name, "NotEnforced in cluster-2, Synced in cluster-1", func(s *setView) error {
		for _, c := range s.Clusters {
			want := policyhubv1.ClusterPhaseSynced
			if c.Name == "cluster-2" {
				want = policyhubv1.ClusterPhaseNotEnforced
			}
			if c.Phase != want {
				return fmt.Errorf("cluster %s: %s (%s), want %s", c.Name, c.Phase, c.Message, want)
			}
		}
		return nil
	})
	for _, c := range set.Clusters {
		if c.Name != "cluster-2" {
			continue
		}
		for _, want := range []string{"its Kyverno is v1.20.0", "kyverno.io/v1 ClusterPolicy", "its other objects are sent and kept in step"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("cluster-2's message %q lacks %q", c.Message, want)
			}
		}
		if c.InForce == nil || *c.InForce {
			t.Errorf("cluster-2 in force %v, want false", c.InForce)
		}
	}

	// A change of the CEL member reaches cluster-2; the legacy member there stays as it was.
	updatePolicySet(t, name, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Source.Inline[1].Spec = &runtime.RawExtension{Raw: celSpec("every ConfigMap names its team")}
	})
	eventually(t, time.Minute, 200*time.Millisecond, "cluster-2 holds the new ValidatingPolicy", func() error {
		live := &unstructured.Unstructured{}
		live.SetAPIVersion("policies.kyverno.io/v1")
		live.SetKind("ValidatingPolicy")
		if err := cluster2.Get(ctx, client.ObjectKey{Name: celName}, live); err != nil {
			return err
		}
		validations, _, _ := unstructured.NestedSlice(live.Object, "spec", "validations")
		if len(validations) != 1 || validations[0].(map[string]any)["message"] != "every ConfigMap names its team" {
			return fmt.Errorf("validations %v", validations)
		}
		return nil
	})
	waitPolicySet(t, name, "still NotEnforced in cluster-2 at the new version", func(s *setView) error {
		for _, c := range s.Clusters {
			if c.Name == "cluster-2" && (c.Phase != policyhubv1.ClusterPhaseNotEnforced || c.ObservedGeneration > 0 && c.ObservedGeneration != s.Generation) {
				return fmt.Errorf("cluster-2: %s at generation %d", c.Phase, c.ObservedGeneration)
			}
		}
		return nil
	})
	if after := clusterPolicy(t, "cluster-2", legacyName); after == nil || after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the legacy member in cluster-2 was pruned or rewritten (%v)", after)
	}

	versions.set("cluster-2", "v1.19.1")
	waitPolicySet(t, name, "both clusters Synced once cluster-2 says 1.19", bothSynced)
}
