package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
)

var velaApplicationGVK = schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"}

// A kyverno-policy entry of a KubeVela Application becomes an ApplicationPolicy owned by the
// Application; a change of the entry reaches it, and removing the entry deletes it. The
// Application itself is never written.
func TestKubeVelaEntryBecomesApplicationPolicy(t *testing.T) {
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	hub := directClient(t, testFleet.Hub.Config)
	applyKyvernoPolicyDefinition(ctx, t, hub)
	createNamespace(ctx, t, hub, "kv-shop")
	app := createVelaApplication(ctx, t, hub, `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: kv-shop}
spec:
  components: []
  policies:
  - name: limits
    type: kyverno-policy
    properties:
      mode: Audit
      scope: {kinds: [Deployment]}
      rules:
      - name: need-team
        validate:
          message: team label
          pattern: {metadata: {labels: {team: "?*"}}}
  - {name: where, type: topology, properties: {clusters: [cluster-1, cluster-2]}}
`)

	ap := waitVelaPolicy(t, "kv-shop", "shop-limits", "the entry's ApplicationPolicy", func(ap *policyhubv1.ApplicationPolicy) error {
		if ap.Spec.Mode != policyhubv1.ModeAudit {
			return errorf("mode %q, want Audit", ap.Spec.Mode)
		}
		return nil
	})
	if ap.Spec.Application != "shop" {
		t.Errorf("spec.application %q, want shop (defaulted to the Application's name)", ap.Spec.Application)
	}
	if ap.Spec.Scope == nil || fmt.Sprint(ap.Spec.Scope.Kinds) != "[Deployment]" {
		t.Errorf("spec.scope %+v, want kinds [Deployment]", ap.Spec.Scope)
	}
	if len(ap.Spec.Rules) != 1 || !strings.Contains(string(ap.Spec.Rules[0].Raw), `"name":"need-team"`) || !strings.Contains(string(ap.Spec.Rules[0].Raw), `"team":"?*"`) {
		t.Errorf("spec.rules %s, want the entry's need-team rule", marshalJSON(ap.Spec.Rules))
	}
	if got := ap.Labels; got["app.oam.dev/name"] != "shop" || got["policyhub.io/kubevela-policy"] != "limits" {
		t.Errorf("labels %v, want app.oam.dev/name=shop and policyhub.io/kubevela-policy=limits", got)
	}
	if got := ap.Annotations["policyhub.io/kubevela-policy-entry"]; got != "limits" {
		t.Errorf("annotation policyhub.io/kubevela-policy-entry %q, want limits", got)
	}
	refs := ap.OwnerReferences
	if len(refs) != 1 || refs[0].APIVersion != "core.oam.dev/v1beta1" || refs[0].Kind != "Application" || refs[0].Name != "shop" ||
		refs[0].UID != app.GetUID() || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %s, want the Application shop (uid %s) as controller, blocking deletion", marshalJSON(refs), app.GetUID())
	}
	if !hasFieldManager(ap.ManagedFields, "policyhub-kubevela") {
		t.Errorf("the ApplicationPolicy was not applied by field manager policyhub-kubevela: %s", marshalJSON(ap.ManagedFields))
	}
	// Only the kyverno-policy entry became an ApplicationPolicy.
	list := &policyhubv1.ApplicationPolicyList{}
	if err := hub.List(ctx, list, client.InNamespace("kv-shop")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d ApplicationPolicies in kv-shop, want 1 (shop-limits)", len(list.Items))
	}
	waitVelaEvent(t, "kv-shop", "shop", corev1.EventTypeNormal, "PolicyCreated", "shop-limits")

	updateVelaApplication(t, hub, "kv-shop", "shop", func(app *unstructured.Unstructured) {
		policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
		if err := unstructured.SetNestedField(policies[0].(map[string]any), "Enforce", "properties", "mode"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(app.Object, policies, "spec", "policies"); err != nil {
			t.Fatal(err)
		}
	})
	updated := waitVelaPolicy(t, "kv-shop", "shop-limits", "the entry's mode change", func(ap *policyhubv1.ApplicationPolicy) error {
		if ap.Spec.Mode != policyhubv1.ModeEnforce {
			return errorf("mode %q, want Enforce", ap.Spec.Mode)
		}
		return nil
	})
	if updated.UID != ap.UID || updated.Spec.Application != "shop" || len(updated.Spec.Rules) != 1 {
		t.Errorf("after the mode change: uid %s (was %s), application %q, %d rules; want the same object with the rest unchanged",
			updated.UID, ap.UID, updated.Spec.Application, len(updated.Spec.Rules))
	}
	waitVelaEvent(t, "kv-shop", "shop", corev1.EventTypeNormal, "PolicyUpdated", "shop-limits")

	updateVelaApplication(t, hub, "kv-shop", "shop", func(app *unstructured.Unstructured) {
		policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
		if err := unstructured.SetNestedSlice(app.Object, policies[1:], "spec", "policies"); err != nil {
			t.Fatal(err)
		}
	})
	waitVelaPolicyDeleted(t, "kv-shop", "shop-limits")
	waitVelaEvent(t, "kv-shop", "shop", corev1.EventTypeNormal, "PolicyDeleted", "shop-limits")

	// KubeVela owns the Application: the adapter added no finalizer and wrote no field of it.
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(velaApplicationGVK)
	if err := hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
		t.Fatal(err)
	}
	if len(live.GetFinalizers()) > 0 {
		t.Errorf("the Application has finalizers %v", live.GetFinalizers())
	}
	if hasFieldManager(live.GetManagedFields(), "policyhub-kubevela") {
		t.Errorf("the KubeVela adapter wrote the Application: %s", marshalJSON(live.GetManagedFields()))
	}
}

// Entries the hub cannot take get no ApplicationPolicy and a Warning Event on the Application with
// the reason (the API server's own message for what admission refuses); the Application's other
// entries are still turned into ApplicationPolicies.
func TestKubeVelaInvalidEntryIsRefused(t *testing.T) {
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	hub := directClient(t, testFleet.Hub.Config)
	createNamespace(ctx, t, hub, "kv-invalid")
	rules := `[{name: need-team, validate: {message: team label, pattern: {metadata: {labels: {team: "?*"}}}}}]`
	createVelaApplication(ctx, t, hub, `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: kv-invalid}
spec:
  components: []
  policies:
  - {name: sometimes, type: kyverno-policy, properties: {mode: Sometimes, scope: {kinds: [Deployment]}, rules: `+rules+`}}
  - {name: typo, type: kyverno-policy, properties: {mode: Audit, scopes: {kinds: [Deployment]}, rules: `+rules+`}}
  - {name: both, type: kyverno-policy, properties: {scope: {kinds: [Deployment]}, rules: `+rules+`, validations: [{expression: "true"}]}}
  - {name: limits, type: kyverno-policy, properties: {mode: Enforce, scope: {kinds: [Deployment]}, rules: `+rules+`}}
`)

	// The valid entry is not held up by the others.
	waitVelaPolicy(t, "kv-invalid", "shop-limits", "the valid entry's ApplicationPolicy", func(ap *policyhubv1.ApplicationPolicy) error {
		if ap.Spec.Mode != policyhubv1.ModeEnforce {
			return errorf("mode %q, want Enforce", ap.Spec.Mode)
		}
		return nil
	})
	mode := waitVelaEvent(t, "kv-invalid", "shop", corev1.EventTypeWarning, "PolicyRefused", `"sometimes"`)
	for _, want := range []string{"spec.mode", `Unsupported value: "Sometimes"`, `"Audit"`, `"Enforce"`} {
		if !strings.Contains(mode.Note, want) {
			t.Errorf("the refusal of entry sometimes says %q; want it to contain %q", mode.Note, want)
		}
	}
	typo := waitVelaEvent(t, "kv-invalid", "shop", corev1.EventTypeWarning, "InvalidPolicyEntry", `"typo"`)
	if !strings.Contains(typo.Note, `unknown field "scopes"`) {
		t.Errorf("the refusal of entry typo says %q; want it to name the unknown field scopes", typo.Note)
	}
	both := waitVelaEvent(t, "kv-invalid", "shop", corev1.EventTypeWarning, "PolicyRefused", `"both"`)
	if !strings.Contains(both.Note, "give spec.rules or spec.validations, not both") {
		t.Errorf("the refusal of entry both says %q; want the CRD's CEL message", both.Note)
	}
	// The Events come after the hub refused: nothing was written for the refused entries.
	for _, name := range []string{"shop-sometimes", "shop-typo", "shop-both"} {
		err := hub.Get(ctx, client.ObjectKey{Namespace: "kv-invalid", Name: name}, &policyhubv1.ApplicationPolicy{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("ApplicationPolicy kv-invalid/%s: %v, want none", name, err)
		}
	}
	list := &policyhubv1.ApplicationPolicyList{}
	if err := hub.List(ctx, list, client.InNamespace("kv-invalid")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d ApplicationPolicies in kv-invalid, want 1 (shop-limits)", len(list.Items))
	}
}

// The adapter is registered only where KubeVela's Application is served: the fleet's hub serves
// it, a managed cluster (standing in for a hub without KubeVela) does not, and asking is no error.
func TestKubeVelaApplicationServed(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  *rest.Config
		want bool
	}{{"hub", testFleet.Hub.Config, true}, {testFleet.Managed[0].Name, testFleet.Managed[0].Config, false}} {
		mgr, err := ctrl.NewManager(c.cfg, ctrl.Options{Scheme: testScheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		if err != nil {
			t.Fatal(err)
		}
		served, err := controllers.ApplicationServed(mgr)
		if err != nil || served != c.want {
			t.Errorf("%s: ApplicationServed = %v, %v; want %v, no error", c.name, served, err, c.want)
		}
	}
}

// applyKyvernoPolicyDefinition applies config/kubevela/kyverno-policy.yaml to the hub, in
// vela-system (created when missing and kept: other tests may apply the definition too).
func applyKyvernoPolicyDefinition(ctx context.Context, t *testing.T, hub client.Client) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "config", "kubevela", "kyverno-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def := object(t, string(data))
	if def.GetKind() != "PolicyDefinition" || def.GetName() != "kyverno-policy" || def.GetNamespace() != "vela-system" {
		t.Fatalf("config/kubevela/kyverno-policy.yaml is %s %s/%s, want PolicyDefinition vela-system/kyverno-policy", def.GetKind(), def.GetNamespace(), def.GetName())
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vela-system"}}
	if err := hub.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace vela-system: %v", err)
	}
	apply(ctx, t, hub, def)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(def.GroupVersionKind())
	if err := hub.Get(ctx, client.ObjectKeyFromObject(def), live); err != nil {
		t.Fatal(err)
	}
	template, _, _ := unstructured.NestedString(live.Object, "spec", "schematic", "cue", "template")
	if !strings.HasPrefix(template, "parameter: {") || strings.Contains(template, "output") {
		t.Errorf("the hub holds the template %q; want only the parameter schema", template)
	}
}

// createVelaApplication creates a KubeVela Application on the hub from YAML and, when the test
// ends, deletes it and waits until the adapter deleted its ApplicationPolicies.
func createVelaApplication(ctx context.Context, t *testing.T, hub client.Client, manifest string) *unstructured.Unstructured {
	t.Helper()
	app := object(t, manifest)
	if err := hub.Create(ctx, app); err != nil {
		t.Fatalf("create Application %s/%s: %v", app.GetNamespace(), app.GetName(), err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := hub.Delete(ctx, app); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete Application %s/%s: %v", app.GetNamespace(), app.GetName(), err)
			return
		}
		eventually(t, 60*time.Second, 200*time.Millisecond, "the Application's ApplicationPolicies deleted", func() error {
			list := &policyhubv1.ApplicationPolicyList{}
			if err := hub.List(ctx, list, client.InNamespace(app.GetNamespace()), client.MatchingLabels{"app.oam.dev/name": app.GetName()}); err != nil {
				return err
			}
			for _, ap := range list.Items {
				if ap.DeletionTimestamp.IsZero() {
					return errorf("%s is still there", ap.Name)
				}
			}
			return nil
		})
	})
	return app
}

// updateVelaApplication reads the Application, applies change and writes it back.
func updateVelaApplication(t *testing.T, hub client.Client, namespace, name string, change func(*unstructured.Unstructured)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(velaApplicationGVK)
		if err := hub.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, app); err != nil {
			return err
		}
		change(app)
		return hub.Update(context.Background(), app)
	})
	if err != nil {
		t.Fatalf("update Application %s/%s: %v", namespace, name, err)
	}
}

// waitVelaPolicy polls the ApplicationPolicy until it exists and check accepts it, and returns it.
func waitVelaPolicy(t *testing.T, namespace, name, what string, check func(*policyhubv1.ApplicationPolicy) error) *policyhubv1.ApplicationPolicy {
	t.Helper()
	hub := directClient(t, testFleet.Hub.Config)
	ap := &policyhubv1.ApplicationPolicy{}
	eventually(t, 30*time.Second, 100*time.Millisecond, what, func() error {
		if err := hub.Get(testContext(t), client.ObjectKey{Namespace: namespace, Name: name}, ap); err != nil {
			return err
		}
		return check(ap)
	})
	return ap
}

// waitVelaPolicyDeleted polls until the ApplicationPolicy is gone or being deleted (whatever its
// own controller's finalizer still does is not the adapter's).
func waitVelaPolicyDeleted(t *testing.T, namespace, name string) {
	t.Helper()
	hub := directClient(t, testFleet.Hub.Config)
	eventually(t, 30*time.Second, 100*time.Millisecond, "ApplicationPolicy "+namespace+"/"+name+" deleted", func() error {
		ap := &policyhubv1.ApplicationPolicy{}
		err := hub.Get(testContext(t), client.ObjectKey{Namespace: namespace, Name: name}, ap)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case !ap.DeletionTimestamp.IsZero():
			return nil
		}
		return errorf("still there, not being deleted")
	})
}

// waitVelaEvent polls the hub's events.k8s.io Events until one of type and reason regards the
// Application and its note contains mention, and returns it.
func waitVelaEvent(t *testing.T, namespace, app, eventType, reason, mention string) eventsv1.Event {
	t.Helper()
	hub := directClient(t, testFleet.Hub.Config)
	var found eventsv1.Event
	eventually(t, 30*time.Second, 200*time.Millisecond, fmt.Sprintf("a %s %s Event on Application %s mentioning %s", eventType, reason, app, mention), func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(testContext(t), list, client.InNamespace(namespace)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "Application" || e.Regarding.APIVersion != "core.oam.dev/v1beta1" || e.Regarding.Name != app {
				continue
			}
			if e.Type == eventType && e.Reason == reason && strings.Contains(e.Note, mention) {
				found = e
				return nil
			}
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
		}
		return errorf("none among the Application's Events %q", seen)
	})
	return found
}

func hasFieldManager(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager {
			return true
		}
	}
	return false
}
