package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// applySummary server-side applies a summary as fieldOwner, as an agent does.
func applySummary(ctx context.Context, c client.Client, s *policyhubv1.PolicyReportSummary, fieldOwner string) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return err
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: obj}), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

func summaryFor(namespace, cluster string) *policyhubv1.PolicyReportSummary {
	return &policyhubv1.PolicyReportSummary{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: "PolicyReportSummary"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: policyhubv1.SummaryName},
		Spec: policyhubv1.PolicyReportSummarySpec{
			Cluster: cluster, GeneratedAt: &metav1.Time{Time: time.Now()},
			Totals:   policyhubv1.ResultCounts{Fail: 666},
			Policies: []policyhubv1.PolicySummary{{Name: "forged", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 666}}},
		},
	}
}

// An agent's hub identity (config/rbac/agent-hub-access) may write its own cluster's summary and
// nothing else: not another cluster's, not anything else in its namespace.
func TestAgentIdentityWritesOnlyItsOwnSummary(t *testing.T) {
	ctx := testContext(t)
	agentHubConfig(t, "cluster-2") // cluster-2's namespace and identity exist too
	scheme := testScheme
	agent1, err := client.New(agentHubConfig(t, "cluster-1"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	own := summaryFor("cluster-1", "cluster-1")
	if err := applySummary(ctx, agent1, own, "isolation-test"); err != nil {
		t.Fatalf("cluster-1's agent cannot write its own summary: %v", err)
	}
	t.Cleanup(func() { _ = directClient(t, fleetOf(t).Hub.Config).Delete(ctx, own) })

	other := summaryFor("cluster-2", "cluster-1")
	if err := applySummary(ctx, agent1, other, "isolation-test"); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent writing cluster-2's summary: got %v, want Forbidden", err)
	}
	if err := agent1.List(ctx, &corev1.SecretList{}, client.InNamespace("cluster-1")); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent listing Secrets in its namespace: got %v, want Forbidden", err)
	}
	if err := agent1.List(ctx, &policyhubv1.FleetPolicyList{}); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent listing FleetPolicies: got %v, want Forbidden", err)
	}
}

// A summary that claims another cluster than its namespace is refused: Stalled with the reason, a
// Warning Event, and neither its numbers nor its namespace reach the metrics.
func TestHubRefusesSummaryOfAnotherCluster(t *testing.T) {
	hub := startHub(t, time.Hour)
	ctx := testContext(t)
	admin := directClient(t, fleetOf(t).Hub.Config)
	const impostor = "impostor-cluster"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: impostor}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	forged := summaryFor(impostor, "cluster-1")
	if err := applySummary(ctx, admin, forged, "isolation-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, forged) })

	eventually(t, 30*time.Second, 200*time.Millisecond, "the summary marked Stalled (ClusterMismatch)", func() error {
		s := &policyhubv1.PolicyReportSummary{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(forged), s); err != nil {
			return err
		}
		for _, c := range s.Status.Conditions {
			if c.Type == policyhubv1.ConditionStalled && c.Status == metav1.ConditionTrue && c.Reason == "ClusterMismatch" {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", s.Status.Conditions)
	})
	eventually(t, 30*time.Second, 200*time.Millisecond, "a Warning Event on the summary", func() error {
		list := &eventsv1.EventList{}
		if err := admin.List(ctx, list, client.InNamespace(impostor)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == policyhubv1.SummaryName && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("%d events, none a Warning about the summary", len(list.Items))
	})
	for _, cluster := range []string{impostor, "cluster-1"} {
		if v, ok := hub.scrape(t, "policyhub_policy_results", map[string]string{"cluster": cluster, "policy": "forged"}); ok {
			t.Errorf("the forged summary reached the metrics as cluster %s: %v", cluster, v)
		}
	}
}

// The hub reads only the summary named SummaryName in a cluster's namespace. Any other name is
// refused at admission, also when the cluster's own agent identity writes it (RBAC cannot
// restrict the names an identity creates): nothing is stored, so the hub caches, aggregates
// and answers nothing for it (no status, no Event, no series).
func TestSummaryUnderAnotherNameIsRefused(t *testing.T) {
	hub := startHub(t, time.Hour)
	ctx := testContext(t)
	admin := directClient(t, fleetOf(t).Hub.Config)
	agent1, err := client.New(agentHubConfig(t, "cluster-1"), client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	forged := summaryFor("cluster-1", "cluster-1")
	forged.Name = "not-the-summary"
	err = applySummary(ctx, agent1, forged, "isolation-test")
	if err == nil {
		t.Cleanup(func() { _ = admin.Delete(context.Background(), forged) })
		t.Fatal("a summary under another name was admitted")
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("refused with %v, want Invalid naming metadata.name", err)
	}

	// Nothing changed on the hub.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(forged), &policyhubv1.PolicyReportSummary{}); !apierrors.IsNotFound(err) {
		t.Errorf("reading the refused summary: %v, want NotFound", err)
	}
	list := &eventsv1.EventList{}
	if err := admin.List(ctx, list, client.InNamespace("cluster-1")); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == forged.Name {
			t.Errorf("an Event about the refused summary: %s %s", e.Reason, e.Note)
		}
	}
	if v, ok := hub.scrape(t, "policyhub_policy_results", map[string]string{"cluster": "cluster-1", "policy": "forged"}); ok {
		t.Errorf("the refused summary reached the metrics: %v", v)
	}
}
