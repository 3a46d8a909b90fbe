package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// approverClient is a client acting as user, bound fleet-wide to config/rbac/exception-approver's
// ClusterRole, as a hub admin binds a security team.
func approverClient(t *testing.T, user string) client.Client {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "exception-approver-" + strings.ReplaceAll(user, "@", "-at-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: applyClusterRole(t, "../config/rbac/exception-approver/cluster_role.yaml")},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, parallel := testScope(t); !parallel {
		// Parallel tests share the approver: it stays for the package's run.
		t.Cleanup(func() { _ = hub.Delete(context.Background(), binding) })
	}
	waitAllowed(t, user, authorizationv1.ResourceAttributes{Verb: "update", Group: policyhubv1.GroupVersion.Group, Resource: "fleetpolicyexceptions", Subresource: "status"})
	return impersonating(t, user)
}

// impersonating is a client acting as user (impersonated by the fleet's admin).
func impersonating(t *testing.T, user string) client.Client {
	cfg := rest.CopyConfig(fleetOf(t).Hub.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return directClient(t, cfg)
}

// requestException creates a FleetPolicyException from YAML as c's user and, when the test ends,
// deletes it and waits until the hub has removed it from every cluster and let it go.
func requestException(t *testing.T, c client.Client, manifest string) *policyhubv1.FleetPolicyException {
	t.Helper()
	ctx := testContext(t)
	ex := &policyhubv1.FleetPolicyException{}
	if err := yaml.Unmarshal([]byte(manifest), ex); err != nil {
		t.Fatal(err)
	}
	inScope(t, ex)
	if err := c.Create(ctx, ex); err != nil {
		t.Fatalf("request FleetPolicyException %s/%s: %v", ex.Namespace, ex.Name, err)
	}
	t.Cleanup(func() {
		deleteDeclaration(t, &policyhubv1.FleetPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ex.Namespace, Name: ex.Name}})
	})
	return ex
}

// approvedException requests the exception as the fleet's admin (in the hub's namespace: the
// admin's) and has an approver, security@corp, approve it.
func approvedException(t *testing.T, manifest string) *policyhubv1.FleetPolicyException {
	t.Helper()
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), manifest)
	if err := decide(testContext(t), t, approverClient(t, "security@corp"), ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve %s: %v", ex.Name, err)
	}
	return ex
}

// exceptionClusters are the exception's per-cluster states, from its ClusterStatusSlices, by name.
func exceptionClusters(ctx context.Context, t *testing.T, ex *policyhubv1.FleetPolicyException) (map[string]policyhubv1.ClusterStatus, error) {
	t.Helper()
	clusters, _, err := statusslice.Read(ctx, directClient(t, fleetOf(t).Hub.Config), statusslice.Owner{
		Kind: policyhubv1.KindFleetPolicyException, Name: ex.Name, UID: string(ex.UID), Namespace: ex.Namespace})
	if err != nil {
		return nil, err
	}
	byName := map[string]policyhubv1.ClusterStatus{}
	for _, c := range clusters {
		byName[c.Name] = c
	}
	return byName, nil
}

// decide writes an approver's decision on the exception's current generation, as c's user (by)
// through the status subresource: what `kubectl policyhub exception approve|deny|revoke` does.
func decide(ctx context.Context, t *testing.T, c client.Client, ex *policyhubv1.FleetPolicyException, decision, by string) error {
	t.Helper()
	live := &policyhubv1.FleetPolicyException{}
	if err := directClient(t, fleetOf(t).Hub.Config).Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil {
		t.Fatal(err)
	}
	return decideOn(ctx, c, live, decision, by, live.Generation)
}

// decideOn patches status.approval of ex as c's user, exactly as given.
func decideOn(ctx context.Context, c client.Client, ex *policyhubv1.FleetPolicyException, decision, by string, generation int64) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"approval": map[string]any{
		"decision": decision, "by": by, "generation": generation, "at": time.Now().UTC().Format(time.RFC3339),
	}}})
	if err != nil {
		return err
	}
	target := &policyhubv1.FleetPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ex.Namespace, Name: ex.Name}}
	return c.Status().Patch(ctx, target, client.RawPatch("application/merge-patch+json", patch))
}

// waitException polls the exception until check passes (60s).
func waitException(t *testing.T, ex *policyhubv1.FleetPolicyException, what string, check func(*policyhubv1.FleetPolicyException) error) *policyhubv1.FleetPolicyException {
	t.Helper()
	return waitExceptionFor(t, ex, 60*time.Second, what, check)
}

// waitExceptionFor polls the exception until check passes or timeout.
func waitExceptionFor(t *testing.T, ex *policyhubv1.FleetPolicyException, timeout time.Duration, what string, check func(*policyhubv1.FleetPolicyException) error) *policyhubv1.FleetPolicyException {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	live := &policyhubv1.FleetPolicyException{}
	eventually(t, timeout, 200*time.Millisecond, "FleetPolicyException "+ex.Name+": "+what, func() error {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil {
			return err
		}
		return check(live)
	})
	return live
}

// exceptionState passes once the exception is observed in state (at its current generation).
func exceptionState(state string) func(*policyhubv1.FleetPolicyException) error {
	return func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.ObservedGeneration != ex.Generation || ex.Status.State != state {
			return fmt.Errorf("state %q at generation %d/%d, want %s (conditions %v)", ex.Status.State, ex.Status.ObservedGeneration, ex.Generation, state, ex.Status.Conditions)
		}
		return nil
	}
}

// kyvernoExceptions are the PolicyExceptions of apiVersion (kyverno.io/v2 or
// policies.kyverno.io/v1) in the cluster's exception namespace, by name.
func kyvernoExceptions(ctx context.Context, t *testing.T, cluster, apiVersion string) map[string]*unstructured.Unstructured {
	t.Helper()
	return kyvernoExceptionsIn(ctx, t, cluster, apiVersion, policyhubv1.DefaultExceptionNamespace)
}

// kyvernoExceptionsIn are the PolicyExceptions of apiVersion in a namespace of the cluster, by name.
func kyvernoExceptionsIn(ctx context.Context, t *testing.T, cluster, apiVersion, namespace string) map[string]*unstructured.Unstructured {
	t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gv.WithKind("PolicyExceptionList"))
	if err := directClient(t, fleetOf(t).Cluster(cluster).Config).List(ctx, list, client.InNamespace(namespace)); err != nil {
		t.Fatalf("list %s PolicyExceptions in %s/%s: %v", apiVersion, cluster, namespace, err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

// admittedEventually polls a dry-run create of the Deployment in the cluster until Kyverno admits
// it: a new exception takes effect within moments to seconds (kyverno#17106).
func admittedEventually(ctx context.Context, t *testing.T, cluster string, obj client.Object, what string) {
	t.Helper()
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	eventually(t, 60*time.Second, time.Second, what, func() error {
		return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	})
}

// deniedEventually polls a dry-run create of the Deployment in the cluster until Kyverno denies it,
// and returns the denial.
func deniedEventually(ctx context.Context, t *testing.T, cluster string, obj client.Object, what string) error {
	t.Helper()
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	var denial error
	eventually(t, 60*time.Second, time.Second, what, func() error {
		denial = c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		if denial == nil {
			return fmt.Errorf("admitted")
		}
		return nil
	})
	return denial
}

// enforcedLatestTag is a FleetPolicy enforcing latestTagPolicy in namespace ns of both clusters.
func enforcedLatestTag(t *testing.T, name, ns string) *policyhubv1.FleetPolicy {
	t.Helper()
	fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, name, marshalJSON(latestTagPolicy(t, "unused", ns, "Enforce").Object["spec"])))
	waitFleetPolicy(t, fp.Name, "in force in both clusters", allInForce)
	return fp
}

// expiresIn is an RFC 3339 time d from now, for spec.expiresAt.
func expiresIn(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

// withoutBinding deletes one of the hub's admission policy bindings, as installed from
// config/admission (kind ValidatingAdmissionPolicyBinding or MutatingAdmissionPolicyBinding), and
// returns what puts it back as it was; it is put back when the test ends in any case.
func withoutBinding(t *testing.T, kind, name string) (restore func()) {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	binding := &unstructured.Unstructured{}
	binding.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind})
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil {
		t.Fatalf("the fleet's %s %s: %v", kind, name, err)
	}
	kept := binding.DeepCopy()
	kept.SetResourceVersion("")
	kept.SetUID("")
	kept.SetManagedFields(nil)
	kept.SetCreationTimestamp(metav1.Time{})
	kept.SetGeneration(0)
	if err := hub.Delete(ctx, binding); err != nil {
		t.Fatalf("delete %s %s: %v", kind, name, err)
	}
	restore = func() {
		if err := hub.Create(context.Background(), kept.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("put back %s %s: %v", kind, name, err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// fenceInEffect polls until the hub's apiserver enforces the approval policy again: a decision in
// another user's name on ex (a dry run, nothing stored) is refused.
func fenceInEffect(t *testing.T, approver client.Client, ex *policyhubv1.FleetPolicyException) {
	t.Helper()
	ctx := testContext(t)
	live := &policyhubv1.FleetPolicyException{}
	if err := directClient(t, fleetOf(t).Hub.Config).Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"approval": map[string]any{
		"decision": policyhubv1.DecisionDenied, "by": "probe-of-the-fence", "generation": live.Generation}}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the approval policy in effect", func() error {
		err := approver.Status().Patch(ctx, live.DeepCopy(), client.RawPatch("application/merge-patch+json", patch), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "status.approval.by must be the user deciding") {
			return fmt.Errorf("a decision in another's name: %v", err)
		}
		return nil
	})
}

// approvedCondition passes once the exception's Approved condition, at its current generation,
// has the reason and a message containing message.
func approvedCondition(reason, message string) func(*policyhubv1.FleetPolicyException) error {
	return func(ex *policyhubv1.FleetPolicyException) error {
		c := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionApproved)
		if c == nil || c.ObservedGeneration != ex.Generation || c.Reason != reason || !strings.Contains(c.Message, message) {
			return fmt.Errorf("Approved condition %+v at generation %d, want reason %s and a message containing %q", c, ex.Generation, reason, message)
		}
		return nil
	}
}

// noExceptionAnywhere checks that no cluster holds a kyverno.io/v2 PolicyException.
func noExceptionAnywhere(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, c := range []string{"cluster-1", "cluster-2"} {
		if got := kyvernoExceptions(ctx, t, c, "kyverno.io/v2"); len(got) != 0 {
			t.Errorf("%s holds PolicyExceptions %v", c, keysOf(got))
		}
	}
}

// deniedScene is what an exception test exempts from: namespace ns in both clusters, the tenant's
// hub namespace, granted both clusters and ns, a FleetPolicy named policy enforcing
// latestTagPolicy there, and the Deployment it denies (checked denied in cluster-1).
func deniedScene(ctx context.Context, t *testing.T, tenant, ns, policy string) (*policyhubv1.FleetPolicy, *appsv1.Deployment) {
	t.Helper()
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	createNamespace(ctx, t, directClient(t, fleetOf(t).Hub.Config), tenant)
	grantTenant(ctx, t, tenant, ns)
	fp := enforcedLatestTag(t, policy, ns)
	latest := deployment(ns, "web-latest", "nginx:latest")
	assertKyvernoDenial(t, "before any exception", deniedEventually(ctx, t, "cluster-1", latest, "denied in cluster-1"), ns, fp.Name)
	return fp, latest
}
