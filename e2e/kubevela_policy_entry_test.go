package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/controllers"
)

// KubeVela's own controller turns a kyverno-policy entry into the entry's ApplicationPolicy (the
// PolicyDefinition's output) before the workflow runs: named <application>-<entry>-<hash>, its
// application defaulted, labelled with the Application and annotated with the entry. A change of
// the entry reaches it, and removing the entry deletes it.
func TestKubeVelaEntryBecomesApplicationPolicy(t *testing.T) {
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	applyKubeVelaDefinitions(ctx, t, hub)
	createNamespace(ctx, t, hub, "kv-shop")
	grantTenant(ctx, t, "kv-shop")
	createVelaApplication(ctx, t, hub, `
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

	ap := waitVelaPolicy(t, "kv-shop", policyhubv1.KubeVelaEntryName("shop", "limits"), "the entry's ApplicationPolicy", func(ap *appView) error {
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
	if rules := string(marshalJSON(ap.Spec.Rules)); len(ap.Spec.Rules) != 1 || !strings.Contains(rules, `"name":"need-team"`) || !strings.Contains(rules, `"team":"?*"`) {
		t.Errorf("spec.rules %s, want the entry's need-team rule", marshalJSON(ap.Spec.Rules))
	}
	if got := ap.Labels["app.oam.dev/name"]; got != "shop" {
		t.Errorf("label app.oam.dev/name %q, want shop (KubeVela's)", got)
	}
	if got := ap.Annotations[policyhubv1.AnnotationKubeVelaPolicyEntry]; got != "limits" {
		t.Errorf("annotation %s %q, want limits", policyhubv1.AnnotationKubeVelaPolicyEntry, got)
	}
	// Only the kyverno-policy entry became an ApplicationPolicy.
	list := &policyhubv1.ApplicationPolicyList{}
	if err := hub.List(ctx, list, client.InNamespace("kv-shop")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d ApplicationPolicies in kv-shop, want 1 (shop-limits)", len(list.Items))
	}

	updateVelaApplication(t, hub, "kv-shop", "shop", func(app *unstructured.Unstructured) {
		policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
		if err := unstructured.SetNestedField(policies[0].(map[string]any), "Enforce", "properties", "mode"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(app.Object, policies, "spec", "policies"); err != nil {
			t.Fatal(err)
		}
	})
	updated := waitVelaPolicy(t, "kv-shop", policyhubv1.KubeVelaEntryName("shop", "limits"), "the entry's mode change", func(ap *appView) error {
		if ap.Spec.Mode != policyhubv1.ModeEnforce {
			return errorf("mode %q, want Enforce", ap.Spec.Mode)
		}
		return nil
	})
	if updated.UID != ap.UID || updated.Spec.Application != "shop" || len(updated.Spec.Rules) != 1 {
		t.Errorf("after the mode change: uid %s (was %s), application %q, %d rules; want the same object with the rest unchanged",
			updated.UID, ap.UID, updated.Spec.Application, len(updated.Spec.Rules))
	}

	updateVelaApplication(t, hub, "kv-shop", "shop", func(app *unstructured.Unstructured) {
		policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
		if err := unstructured.SetNestedSlice(app.Object, policies[1:], "spec", "policies"); err != nil {
			t.Fatal(err)
		}
	})
	waitVelaPolicyDeleted(t, "kv-shop", policyhubv1.KubeVelaEntryName("shop", "limits"))
}

// KubeVela names an entry's ApplicationPolicy by the definition's CUE, which must give what
// policyhubv1.KubeVelaEntryName gives: an Application whose name has a dot and whose pair with
// the entry is longer than a DNS label gets the cleaned, cut and hashed name; and two
// Applications whose pairs join alike with '-' (a-b's entry c, a's entry b-c) get one each.
func TestKubeVelaEntryNameIsGeneratedName(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	applyKubeVelaDefinitions(ctx, t, hub)
	createNamespace(ctx, t, hub, "kv-names")
	grantTenant(ctx, t, "kv-names")
	pairs := [][2]string{
		{"storefront.checkout-service-with-a-rather-long-name", "require-limits"},
		{"names-a-b", "c"},
		{"names-a", "b-c"},
	}
	if long := pairs[0][0] + "-" + pairs[0][1]; len(long) <= 63 || strings.Contains(policyhubv1.KubeVelaEntryName(pairs[0][0], pairs[0][1]), ".") {
		t.Fatalf("%q: the test needs a pair that is cleaned and cut", long)
	}
	want := map[string]bool{}
	for _, p := range pairs {
		createVelaApplication(ctx, t, hub, fmt.Sprintf(`
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: %s, namespace: kv-names}
spec:
  components: []
  policies:
  - {name: %s, type: kyverno-policy, properties: {scope: {kinds: [Deployment]}, validations: [{expression: "true"}]}}
`, p[0], p[1]))
		want[policyhubv1.KubeVelaEntryName(p[0], p[1])] = true
	}
	if len(want) != len(pairs) {
		t.Fatalf("KubeVelaEntryName gives %d names for %d pairs", len(want), len(pairs))
	}
	eventually(t, 30*time.Second, 100*time.Millisecond, "the entries' ApplicationPolicies", func() error {
		list := &policyhubv1.ApplicationPolicyList{}
		if err := hub.List(ctx, list, client.InNamespace("kv-names")); err != nil {
			return err
		}
		if len(list.Items) != len(pairs) {
			return errorf("%d ApplicationPolicies in kv-names, want the %d entries'", len(list.Items), len(pairs))
		}
		for _, ap := range list.Items {
			if !want[ap.Name] {
				t.Fatalf("KubeVela named an entry's ApplicationPolicy %q; policyhubv1.KubeVelaEntryName gives %v", ap.Name, want)
			}
		}
		return nil
	})
}

// An entry KubeVela or the hub's API refuses gets no ApplicationPolicy, and the Application says
// why, naming the field: a property the definition does not know (a typo), a value out of its
// enum, and a spec the ApplicationPolicy CRD's own CEL rules refuse.
func TestKubeVelaInvalidEntryIsRefused(t *testing.T) {
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	applyKubeVelaDefinitions(ctx, t, hub)
	createNamespace(ctx, t, hub, "kv-invalid")
	grantTenant(ctx, t, "kv-invalid")
	rules := `[{name: need-team, validate: {message: team label, pattern: {metadata: {labels: {team: "?*"}}}}}]`
	for _, c := range []struct{ entry, properties, want string }{
		{"sometimes", `{mode: Sometimes, scope: {kinds: [Deployment]}, rules: ` + rules + `}`, "mode"},
		{"typo", `{mode: Audit, scopes: {kinds: [Deployment]}, rules: ` + rules + `}`, "scopes"},
		{"both", `{scope: {kinds: [Deployment]}, rules: ` + rules + `, validations: [{expression: "true"}]}`, "give spec.rules or spec.validations, not both"},
	} {
		t.Run(c.entry, func(t *testing.T) {
			name := "shop-" + c.entry
			createVelaApplication(ctx, t, hub, fmt.Sprintf(`
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: %s, namespace: kv-invalid}
spec:
  components: []
  policies:
  - {name: %s, type: kyverno-policy, properties: %s}
`, name, c.entry, c.properties))
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
			eventually(t, 60*time.Second, 200*time.Millisecond, "the Application says why the entry was refused", func() error {
				if err := hub.Get(ctx, client.ObjectKey{Namespace: "kv-invalid", Name: name}, live); err != nil {
					return err
				}
				conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
				for _, cond := range conditions {
					if m, ok := cond.(map[string]any); ok && m["status"] == "False" && strings.Contains(fmt.Sprint(m["message"]), c.want) {
						t.Logf("condition %v: %v", m["type"], m["message"])
						return nil
					}
				}
				return errorf("no False condition mentioning %q: %v", c.want, conditions)
			})
			list := &policyhubv1.ApplicationPolicyList{}
			if err := hub.List(ctx, list, client.InNamespace("kv-invalid"), client.MatchingLabels{"app.oam.dev/name": name}); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 0 {
				t.Errorf("%d ApplicationPolicies for the refused entry, want none", len(list.Items))
			}
		})
	}
}

// The hub reads KubeVela Applications only where KubeVela's Application is served: the fleet's hub serves
// it, a managed cluster (standing in for a hub without KubeVela) does not, and asking is no error.
func TestKubeVelaApplicationServed(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  *rest.Config
		want bool
	}{{"hub", fleetOf(t).Hub.Config, true}, {fleetOf(t).Managed[0].Name, fleetOf(t).Managed[0].Config, false}} {
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

// velaEntryStatus reads the Application and returns the status policyhub mirrored into its
// status.policy for the kyverno-policy entry, or an error when there is none.
func velaEntryStatus(ctx context.Context, hub client.Client, app, live *unstructured.Unstructured, entry string) (map[string]any, error) {
	if err := hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
		return nil, err
	}
	policies, _, _ := unstructured.NestedSlice(live.Object, "status", "policy")
	for _, p := range policies {
		if m, ok := p.(map[string]any); ok && m["name"] == entry && m["type"] == policyhubv1.KubeVelaPolicyType {
			status, _ := m["status"].(map[string]any)
			return status, nil
		}
	}
	return nil, fmt.Errorf("no kyverno-policy entry %s in status.policy: %v", entry, policies)
}

// applyKubeVelaDefinitions applies policyhub's KubeVela definitions (config/kubevela: the
// kyverno-policy policy type, the kyverno-policy-ready step) to the hub, in vela-system.
func applyKubeVelaDefinitions(ctx context.Context, t *testing.T, hub client.Client) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "config", "kubevela", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("config/kubevela/*.yaml: %v (%d files)", err, len(files))
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		def := object(t, string(data))
		if def.GetNamespace() != fleet.KubeVelaSystemNamespace {
			t.Fatalf("%s is %s %s/%s, want it in %s", file, def.GetKind(), def.GetNamespace(), def.GetName(), fleet.KubeVelaSystemNamespace)
		}
		apply(ctx, t, hub, def)
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
		app.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
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
func waitVelaPolicy(t *testing.T, namespace, name, what string, check func(*appView) error) *appView {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var ap *appView
	eventually(t, 30*time.Second, 100*time.Millisecond, what, func() error {
		var err error
		if ap, err = applicationPolicyWithClusters(testContext(t), hub, namespace, name); err != nil {
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
	hub := directClient(t, fleetOf(t).Hub.Config)
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
