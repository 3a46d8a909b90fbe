package e2e

import (
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// The hub plans from a watch cache that may lag the cluster, so its writes are conditional on
// what it read. The real apiserver (through the gateway, as the hub writes) refuses a write made
// from a state the cluster has moved past: a create when another writer's object of that name
// has appeared, and an update from an older resourceVersion. Neither refusal changes the object;
// a write from the current state goes through. (Kyverno writes its policies' status meanwhile,
// so "unchanged" leaves the status and resourceVersion aside.)
func TestSyncWritesAreConditionalOnWhatWasRead(t *testing.T) {
	ctx := testContext(t)
	obj, _ := renderFleetPolicy(t, "e2e-sync-conditional", auditTemplate("sync-conditional"), nil)
	cluster1 := gatewayClient(t, "cluster-1")
	direct := directClient(t, fleetOf(t).Cluster("cluster-1").Config)

	// Another writer's policy of the same name appears after the hub read the cluster.
	foreign := withRuleMessage(t, obj, "someone else's policy")
	foreign.SetLabels(nil)
	foreign.SetAnnotations(nil)
	if err := direct.Create(ctx, foreign); err != nil {
		t.Fatalf("create the foreign policy: %v", err)
	}
	before := liveCopy(t, obj)
	if _, err := work.Apply(ctx, cluster1, obj, nil, false); !apierrors.IsConflict(err) {
		t.Fatalf("create over another writer's object: err %v, want a Conflict", err)
	}
	assertUnchanged(t, obj, before)
	if err := direct.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	created, err := work.Apply(ctx, cluster1, obj, nil, false)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = cluster1.Delete(ctx, created) })
	first := liveCopy(t, obj)

	// Someone edits the policy in the cluster: an update planned from the earlier read is refused
	// and the edit stays.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return direct.Update(ctx, withRuleMessage(t, liveCopy(t, obj), "edited in the cluster"))
	}); err != nil {
		t.Fatalf("edit in the cluster: %v", err)
	}
	edited := liveCopy(t, obj)
	if _, err := work.Apply(ctx, cluster1, obj, first, false); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale read: err %v, want a Conflict", err)
	}
	assertUnchanged(t, obj, edited)

	// From the current state, the update restores the policy.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := work.Apply(ctx, cluster1, obj, liveCopy(t, obj), false)
		return err
	}); err != nil {
		t.Fatalf("update from the current read: %v", err)
	}
	if msg := ruleMessage(liveCopy(t, obj)); msg != "configmaps need an owner label" {
		t.Errorf("message after the update: %q, want the template's", msg)
	}

	// Deleted after the read: the apiserver creates it anew from the update (an apply may always
	// create, and a create takes no resourceVersion). The answer's UID tells, so the hub counts
	// a create, not an update of an object that no longer exists.
	stale := liveCopy(t, obj)
	if err := direct.Delete(ctx, stale); err != nil {
		t.Fatal(err)
	}
	recreated, err := work.Apply(ctx, cluster1, obj, stale, false)
	if err != nil {
		t.Fatalf("update of an object deleted since the read: %v", err)
	}
	if recreated.GetUID() == "" || recreated.GetUID() == stale.GetUID() || liveCopy(t, obj).GetUID() != recreated.GetUID() {
		t.Errorf("update of a deleted object: UID %q (read %q, live %q), want a new object's", recreated.GetUID(), stale.GetUID(), liveCopy(t, obj).GetUID())
	}
}

// withRuleMessage is a copy of a ClusterPolicy whose first rule has message msg.
func withRuleMessage(t *testing.T, obj *unstructured.Unstructured, msg string) *unstructured.Unstructured {
	t.Helper()
	out := obj.DeepCopy()
	rules, _, _ := unstructured.NestedSlice(out.Object, "spec", "rules")
	rules[0].(map[string]any)["validate"].(map[string]any)["message"] = msg
	if err := unstructured.SetNestedSlice(out.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	return out
}

func ruleMessage(obj *unstructured.Unstructured) any {
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	return rules[0].(map[string]any)["validate"].(map[string]any)["message"]
}

// liveCopy is obj's live copy in cluster-1.
func liveCopy(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// assertUnchanged fails unless obj's live copy in cluster-1 is still before, Kyverno's status
// aside, and policyhub is not among its field managers.
func assertUnchanged(t *testing.T, obj, before *unstructured.Unstructured) {
	t.Helper()
	after := liveCopy(t, obj)
	if !reflect.DeepEqual(withoutKyvernoStatus(after), withoutKyvernoStatus(before)) {
		t.Errorf("the refused write changed the object:\nbefore %v\nafter  %v", withoutKyvernoStatus(before), withoutKyvernoStatus(after))
	}
	for _, mf := range after.GetManagedFields() {
		if mf.Manager == work.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && before.GetLabels()[policyhubv1.LabelManagedBy] == "" {
			t.Errorf("policyhub became a field manager of another writer's object: %+v", mf)
		}
	}
}
