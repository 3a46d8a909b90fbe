package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// libraryException is what a library writer would ship to exempt anything from any policy in
// every placed cluster: a Kyverno PolicyException in the hub's namespace (Kyverno's exception
// namespace), with no requester, approver or end date.
func libraryException(ns string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: lib-trust-everything, namespace: %s}
spec:
  exceptions:
  - policyName: e2e-lib-trust-latest
    ruleNames: [no-latest]
  match:
    any:
    - resources: {kinds: [Deployment], namespaces: [%s]}
`, policyhubv1.SyncLeaseNamespace, ns)
}

// libraryInjector is a mutate policy a library writer would ship to change every new Pod.
func libraryInjector(ns string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: lib-trust-inject}
spec:
  rules:
  - name: inject
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [%s]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels: {injected-by-library: "true"}
`, ns)
}

// A policy library ships only what its PolicySet allows. A new version of a ConfigMap library that
// adds a PolicyException in the hub's namespace and a mutate ClusterPolicy is refused as a whole,
// naming both members: neither reaches any cluster, the clusters keep the last good version, a
// Deployment the exception would have let through is still denied and a new Pod is not mutated.
// The same exception listed inline, or as a FleetPolicy's template, is refused at admission; a
// FleetPolicy's mutate template is Stalled until its spec.allow lists Mutate. Opting in
// (spec.allow: [Mutate], the exception selected out) ships the mutate member, and status says so.
func TestLibraryShipsOnlyWhatItsSetAllows(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns, set = "library-trust-e2e", "e2e-lib-trust"
	clusters := []string{"cluster-1", "cluster-2"}
	for _, c := range clusters {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	enforcedLatestTag(t, "e2e-lib-trust-latest", ns)
	latest := deployment(ns, "web-latest", "nginx:latest")
	deniedEventually(ctx, t, "cluster-1", latest, "the FleetPolicy denies nginx:latest")

	library := createLibrary(t, "lib-trust-library", "trust", map[string]string{"team.yaml": psDeploymentPolicy("lib-trust-team", ns, "team", "Deployments need a team")})
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    configMaps:
      selector: {matchLabels: {library: trust}}
  placement: {clusters: [cluster-1, cluster-2]}
`, set))
	v1 := waitPolicySet(t, set, "version 1 in force", func(s *setView) error {
		if s.Status.Source == nil {
			return fmt.Errorf("no version yet")
		}
		return setInForce(s.Status.Source.Digest, clusters...)(s)
	})
	d1 := v1.Status.Source.Digest

	// The library writer's commit: an exception and an injector beside a changed policy.
	library.Data = map[string]string{
		"team.yaml":      psDeploymentPolicy("lib-trust-team", ns, "team", "Deployments need a team (v2)"),
		"exception.yaml": libraryException(ns),
		"inject.yaml":    libraryInjector(ns),
	}
	if err := hub.Update(ctx, library); err != nil {
		t.Fatal(err)
	}
	refused := waitPolicySet(t, set, "version 2 refused naming both members, version 1 kept", func(s *setView) error {
		c := meta.FindStatusCondition(s.Status.Conditions, "SourceReady")
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("SourceReady %+v", c)
		}
		for _, want := range []string{"member PolicyException policyhub-system/lib-trust-everything: kind PolicyException",
			"member ClusterPolicy lib-trust-inject: spec.rules[0] (inject) mutate needs Mutate", "keep version " + d1} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("SourceReady says %q, not %q", c.Message, want)
			}
		}
		return setKeptWhileSourceDown(d1, clusters...)(s)
	})
	if refused.Status.Source.Digest != d1 {
		t.Fatalf("the set runs %s, want version 1 %s", refused.Status.Source.Digest, d1)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}
	for _, c := range clusters {
		if ex := kyvernoExceptionsIn(ctx, t, c, "kyverno.io/v2", policyhubv1.SyncLeaseNamespace)["lib-trust-everything"]; ex != nil {
			t.Errorf("%s: the library's PolicyException is in the cluster", c)
		}
		if clusterPolicy(t, c, "lib-trust-inject") != nil {
			t.Errorf("%s: the library's mutate policy is in the cluster", c)
		}
		if err := deniedEventually(ctx, t, c, latest, "nginx:latest still denied"); err == nil {
			t.Errorf("%s: nginx:latest admitted", c)
		}
		managed := directClient(t, fleetOf(t).Cluster(c).Config)
		// No controller-manager token controller makes the namespace's default ServiceAccount here.
		if err := managed.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		created := pod.DeepCopy()
		if err := managed.Create(ctx, created); err != nil {
			t.Fatalf("%s: create a Pod: %v", c, err)
		}
		if created.Labels["injected-by-library"] != "" {
			t.Errorf("%s: a new Pod was mutated: labels %v", c, created.Labels)
		}
	}

	// Listed inline, or as a FleetPolicy's template, the exception never passes admission.
	exception := object(t, libraryException(ns))
	for _, manifest := range []string{
		fmt.Sprintf("apiVersion: policyhub.io/v1alpha1\nkind: PolicySet\nmetadata: {name: e2e-lib-trust-inline}\nspec:\n  placement: {clusters: [cluster-1]}\n  source: {inline: [%s]}\n", marshalJSON(exception.Object)),
		fmt.Sprintf("apiVersion: policyhub.io/v1alpha1\nkind: FleetPolicy\nmetadata: {name: e2e-lib-trust-template}\nspec:\n  placement: {clusters: [cluster-1]}\n  template: %s\n", marshalJSON(exception.Object)),
	} {
		err := hub.Create(ctx, object(t, manifest))
		if err == nil || !strings.Contains(err.Error(), "may not be a PolicyException") {
			t.Errorf("created, or refused for another reason: %v", err)
		}
	}

	// A FleetPolicy's mutate template is Stalled, never dispatched, until spec.allow lists Mutate.
	injector := object(t, libraryInjector(ns))
	fp := createFleetPolicy(t, fmt.Sprintf("metadata: {name: e2e-lib-trust-injector}\nspec:\n  placement: {clusters: [cluster-1]}\n  template: %s\n", marshalJSON(injector.Object)))
	waitFleetPolicy(t, fp.Name, "Stalled naming the mutate rule", func(fp *fleetView) error {
		c := meta.FindStatusCondition(fp.Status.Conditions, "Stalled")
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "TemplateNotAllowed" || !strings.Contains(c.Message, "spec.rules[0] (inject) mutate needs Mutate") {
			return fmt.Errorf("Stalled %+v", c)
		}
		return nil
	})
	if clusterPolicy(t, "cluster-1", "lib-trust-inject") != nil {
		t.Fatal("the Stalled FleetPolicy's mutate policy is in cluster-1")
	}
	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
	})
	eventually(t, 60*time.Second, 200*time.Millisecond, "the allowed mutate template in cluster-1", func() error {
		if clusterPolicy(t, "cluster-1", "lib-trust-inject") == nil {
			return fmt.Errorf("not there")
		}
		return nil
	})
	// The set ships a policy of the same name below: this one goes first.
	if err := hub.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "the FleetPolicy's mutate policy pruned", func() error {
		if clusterPolicy(t, "cluster-1", "lib-trust-inject") != nil {
			return fmt.Errorf("still in cluster-1")
		}
		return nil
	})

	// The set's author opts in to mutation and selects the exception out: version 2 ships without it.
	updatePolicySet(t, set, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
		ps.Spec.Select = &policyhubv1.MemberSelector{ExcludeKinds: []string{"PolicyException"}}
	})
	v2 := waitPolicySet(t, set, "version 2 in force without the exception", func(s *setView) error {
		if s.Status.Source == nil || s.Status.Source.Digest == d1 {
			return fmt.Errorf("still version 1")
		}
		if !slices.Equal(s.Status.Source.Capabilities, []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}) {
			return fmt.Errorf("status.source.capabilities %v, want [Mutate]", s.Status.Source.Capabilities)
		}
		if s.Status.Members.Total != 2 {
			return fmt.Errorf("members %+v, want the team policy and the injector", s.Status.Members)
		}
		return nil
	})
	for _, c := range clusters {
		if clusterPolicy(t, c, "lib-trust-inject") == nil {
			t.Errorf("%s: the allowed mutate member is not there (version %s)", c, v2.Status.Source.Digest)
		}
		if ex := kyvernoExceptionsIn(ctx, t, c, "kyverno.io/v2", policyhubv1.SyncLeaseNamespace)["lib-trust-everything"]; ex != nil {
			t.Errorf("%s: the selected-out PolicyException is in the cluster", c)
		}
	}
}
