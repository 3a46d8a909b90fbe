package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// velaApp decodes an Application manifest (YAML), as the API server would hand it over.
func velaApp(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestVelaPolicyName(t *testing.T) {
	long := strings.Repeat("a", 40)
	cases := []struct {
		app, entry string
		want       string // "" when the name must be a hashed form
		prefix     string // what the hashed form starts with
	}{
		{app: "shop", entry: "limits", want: "shop-limits"},
		{app: "shop", entry: "need-team-2", want: "shop-need-team-2"},
		{app: "shop", entry: "Limits", prefix: "shop-limits-"},
		{app: "shop", entry: "need_team", prefix: "shop-need-team-"},
		{app: "shop", entry: "limits-", prefix: "shop-limits-"},
		{app: "shop.v2", entry: "limits", prefix: "shop-v2-limits-"},
		{app: "shop", entry: "résumé", prefix: "shop-r-sum-"},
		{app: long, entry: long, prefix: "aaaa"},
		{app: strings.Repeat("b", 60), entry: "x", prefix: "bbbb"},
		{app: "shop", entry: strings.Repeat("-", 70), prefix: "shop-"},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := velaPolicyName(c.app, c.entry)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("velaPolicyName(%q, %q) = %q: not a DNS label: %v", c.app, c.entry, got, errs)
		}
		if c.want != "" && got != c.want {
			t.Errorf("velaPolicyName(%q, %q) = %q, want %q", c.app, c.entry, got, c.want)
		}
		if c.want == "" && (!strings.HasPrefix(got, c.prefix) || len(got) < len(c.prefix)+10) {
			t.Errorf("velaPolicyName(%q, %q) = %q, want %q + a hash", c.app, c.entry, got, c.prefix)
		}
		if again := velaPolicyName(c.app, c.entry); again != got {
			t.Errorf("velaPolicyName(%q, %q) is not stable: %q then %q", c.app, c.entry, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("velaPolicyName gives %q to both %s and %s/%s", got, prev, c.app, c.entry)
		}
		seen[got] = c.app + "/" + c.entry
	}
	// Entries that clean up to the same text still get different names.
	if a, b := velaPolicyName("shop", "Limits"), velaPolicyName("shop", "LIMITS"); a == b {
		t.Errorf("Limits and LIMITS share the name %q", a)
	}
	if a, b := velaPolicyName(long, long+"1"), velaPolicyName(long, long+"2"); a == b || len(a) > 63 {
		t.Errorf("long entries: %q and %q (want distinct, at most 63 characters)", a, b)
	}
}

func TestVelaLabelValue(t *testing.T) {
	cases := []struct {
		entry, want, prefix string
	}{
		{entry: "limits", want: "limits"},
		{entry: "Need_Team.v2", want: "Need_Team.v2"},
		{entry: "need team", prefix: "need-team-"},
		{entry: "-limits", prefix: "limits-"},
		{entry: strings.Repeat("x", 64), prefix: "xxxx"},
		{entry: "!!!", prefix: ""},
	}
	for _, c := range cases {
		got := velaLabelValue(c.entry)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 || got == "" {
			t.Errorf("velaLabelValue(%q) = %q: not a label value: %v", c.entry, got, errs)
		}
		if c.want != "" && got != c.want {
			t.Errorf("velaLabelValue(%q) = %q, want %q", c.entry, got, c.want)
		}
		if c.want == "" && (!strings.HasPrefix(got, c.prefix) || len(got) < len(c.prefix)+10) {
			t.Errorf("velaLabelValue(%q) = %q, want %q + a hash", c.entry, got, c.prefix)
		}
	}
}

func TestParseVelaEntries(t *testing.T) {
	app := velaApp(t, `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: kv-shop}
spec:
  components: []
  policies:
  - {name: where, type: topology, properties: {clusters: [cluster-1]}}
  - name: limits
    type: kyverno-policy
    properties: {mode: Audit, scope: {kinds: [Deployment]}}
  - {name: bare, type: kyverno-policy}
  - {type: kyverno-policy, properties: {mode: Audit}}
  - {name: limits, type: kyverno-policy, properties: {mode: Enforce}}
  - {name: listy, type: kyverno-policy, properties: [a, b]}
  - {name: other, type: override, properties: {}}
`)
	type want struct {
		index      int
		name       string
		properties string
		err        string
	}
	wants := []want{
		{index: 1, name: "limits", properties: `{"mode":"Audit","scope":{"kinds":["Deployment"]}}`},
		{index: 2, name: "bare"},
		{index: 3, err: "has no name"},
		{index: 4, err: `"limits" is used by an earlier entry`},
		{index: 5, name: "listy", err: "not an object"},
	}
	got := parseVelaEntries(app)
	if len(got) != len(wants) {
		t.Fatalf("parseVelaEntries gave %d entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		if g.Index != w.index || g.Name != w.name || string(g.Properties) != w.properties {
			t.Errorf("entry %d = {%d %q %s}, want {%d %q %s}", i, g.Index, g.Name, g.Properties, w.index, w.name, w.properties)
		}
		switch {
		case w.err == "" && g.Err != nil:
			t.Errorf("entry %d: unexpected error %v", i, g.Err)
		case w.err != "" && (g.Err == nil || !strings.Contains(g.Err.Error(), w.err)):
			t.Errorf("entry %d: error %v, want one containing %q", i, g.Err, w.err)
		}
	}

	if got := parseVelaEntries(velaApp(t, `{spec: {components: []}}`)); len(got) != 0 {
		t.Errorf("an Application without policies gave entries %+v", got)
	}
}

func TestDecodeVelaEntry(t *testing.T) {
	cases := []struct {
		name       string
		properties string // JSON; "" for none
		check      func(policyhubv1.ApplicationPolicySpec) string
		err        string
	}{{
		name:       "rules, application defaulted",
		properties: `{"mode":"Audit","scope":{"kinds":["Deployment"]},"rules":[{"name":"need-team","validate":{"message":"team label","pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`,
		check: func(s policyhubv1.ApplicationPolicySpec) string {
			if s.Application != "shop" || s.Mode != policyhubv1.ModeAudit || s.Scope == nil || len(s.Scope.Kinds) != 1 || s.Scope.Kinds[0] != "Deployment" {
				return "application, mode or scope"
			}
			if len(s.Rules) != 1 || !strings.Contains(string(s.Rules[0].Raw), `"need-team"`) {
				return "rules " + string(velaJSON(s.Rules))
			}
			return ""
		},
	}, {
		name:       "validations, placement and flags, application given",
		properties: `{"application":"web","applicationLabel":"app.kubernetes.io/instance","mode":"Enforce","scope":{"resources":[{"kind":"Deployment","name":"web"}]},"validations":[{"expression":"object.spec.replicas <= 5","message":"at most 5"}],"placement":{"clusters":["cluster-1"],"clusterSelector":{"matchLabels":{"env":"prod"}}},"dryRun":true,"suspend":true,"prune":false}`,
		check: func(s policyhubv1.ApplicationPolicySpec) string {
			if s.Application != "web" || s.ApplicationLabel != "app.kubernetes.io/instance" || s.Mode != policyhubv1.ModeEnforce {
				return "application, label or mode"
			}
			if len(s.Validations) != 1 || s.Validations[0].Expression != "object.spec.replicas <= 5" || s.Validations[0].Message != "at most 5" {
				return "validations"
			}
			if s.Placement == nil || len(s.Placement.Clusters) != 1 || s.Placement.ClusterSelector.MatchLabels["env"] != "prod" {
				return "placement"
			}
			if !s.DryRun || !s.Suspend || s.Prune == nil || *s.Prune {
				return "flags"
			}
			return ""
		},
	}, {
		name: "no properties",
		check: func(s policyhubv1.ApplicationPolicySpec) string {
			if s.Application != "shop" || s.Mode != "" || s.Scope != nil || s.Rules != nil {
				return "want only the application"
			}
			return ""
		},
	}, {
		name:       "an unknown field",
		properties: `{"mode":"Audit","scopes":{"kinds":["Deployment"]}}`,
		err:        `unknown field "scopes"`,
	}, {
		name:       "an unknown nested field",
		properties: `{"scope":{"kind":["Deployment"]},"validations":[{"expression":"true","severity":"high"}]}`,
		err:        `unknown field "scope.kind"; unknown field "validations[0].severity"`,
	}, {
		name:       "field names are case-sensitive",
		properties: `{"Mode":"Enforce"}`,
		err:        `unknown field "Mode"`,
	}, {
		name:       "a wrong type",
		properties: `{"dryRun":"yes"}`,
		err:        "field dryRun of type bool",
	}, {
		name:       "a wrong nested type",
		properties: `{"scope":{"kinds":"Deployment"}}`,
		err:        "field scope.kinds of type []string",
	}, {
		// The enum is the hub's to check, at admission: decoding takes any string.
		name:       "a mode the hub refuses",
		properties: `{"mode":"Sometimes"}`,
		check: func(s policyhubv1.ApplicationPolicySpec) string {
			if s.Mode != "Sometimes" {
				return "mode"
			}
			return ""
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var props []byte
			if c.properties != "" {
				props = []byte(c.properties)
			}
			spec, err := decodeVelaEntry("shop", props)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				if strings.Contains(err.Error(), "spec.") {
					t.Errorf("error %q names the wrapping object's fields, not the properties'", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if what := c.check(spec); what != "" {
				t.Errorf("%s wrong: %s", what, velaJSON(spec))
			}
		})
	}
}

func TestVelaApplicationPolicy(t *testing.T) {
	app := velaApp(t, `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: kv-shop, uid: 0b7e0000-0000-4000-8000-000000000001}
spec: {components: []}
`)
	spec := policyhubv1.ApplicationPolicySpec{Application: "shop", Mode: policyhubv1.ModeAudit,
		Scope: &policyhubv1.Scope{Kinds: []string{"Deployment"}}}
	obj, err := velaApplicationPolicy(app, "limits", spec)
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetAPIVersion() != "policyhub.io/v1alpha1" || obj.GetKind() != "ApplicationPolicy" || obj.GetNamespace() != "kv-shop" || obj.GetName() != "shop-limits" {
		t.Errorf("object %s %s %s/%s", obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace(), obj.GetName())
	}
	wantLabels := map[string]string{"app.oam.dev/name": "shop", "policyhub.io/kubevela-policy": "limits"}
	if got := obj.GetLabels(); len(got) != 2 || got["app.oam.dev/name"] != "shop" || got["policyhub.io/kubevela-policy"] != "limits" {
		t.Errorf("labels %v, want %v", got, wantLabels)
	}
	if got := obj.GetAnnotations(); len(got) != 1 || got["policyhub.io/kubevela-policy-entry"] != "limits" {
		t.Errorf("annotations %v", got)
	}
	want := metav1.OwnerReference{APIVersion: "core.oam.dev/v1beta1", Kind: "Application", Name: "shop",
		UID: types.UID("0b7e0000-0000-4000-8000-000000000001"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if refs := obj.GetOwnerReferences(); len(refs) != 1 || string(velaJSON(refs[0])) != string(velaJSON(want)) {
		t.Errorf("owner references %s, want [%s]", velaJSON(refs), velaJSON(want))
	}
	if !controlledByVelaApplication(obj, "shop") || controlledByVelaApplication(obj, "web") {
		t.Errorf("controlledByVelaApplication: want shop's only")
	}
	// Only what the adapter means to own is applied.
	for _, field := range []string{"status"} {
		if _, has := obj.Object[field]; has {
			t.Errorf("the applied object has %s", field)
		}
	}
	if _, has := obj.Object["metadata"].(map[string]any)["creationTimestamp"]; has {
		t.Errorf("the applied object sets metadata.creationTimestamp")
	}
	gotSpec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if string(velaJSON(gotSpec)) != `{"application":"shop","mode":"Audit","scope":{"kinds":["Deployment"]}}` {
		t.Errorf("spec %s", velaJSON(gotSpec))
	}
}

func TestControlledByVelaApplication(t *testing.T) {
	ref := func(apiVersion, kind, name string, controller bool) metav1.Object {
		return &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(controller)}}}
	}
	cases := []struct {
		obj  metav1.Object
		want bool
	}{
		{ref("core.oam.dev/v1beta1", "Application", "shop", true), true},
		{ref("core.oam.dev/v1alpha2", "Application", "shop", true), true},
		{ref("core.oam.dev/v1beta1", "Application", "shop", false), false},
		{ref("argoproj.io/v1alpha1", "Application", "shop", true), false},
		{ref("core.oam.dev/v1beta1", "Application", "web", true), false},
		{&metav1.ObjectMeta{}, false},
	}
	for i, c := range cases {
		if got := controlledByVelaApplication(c.obj, "shop"); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func velaJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}
