// Package charttest renders the Helm charts of charts/ as `helm install` would, with Helm's Go
// SDK, and reads what they ship (objects, notes, the Grafana dashboard, the alert rules), for
// the charts' tests: those that need no cluster (charts/chartcheck) and those that dry-run or
// install the charts on the local fleet (e2e). The chart directories are the caller's, relative
// to its package; the capabilities (the cluster's Kubernetes version and APIs) are the caller's
// too: HelmTemplate's without a cluster, the hub's on a fleet.
package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/internal/manifests"
)

// Rendered is what `helm install` would send: the templates' objects (CRDs apart) and the
// rendered NOTES.txt.
type Rendered struct {
	Chart   *chart.Chart
	Objects []*unstructured.Unstructured
	Notes   string
}

// ByKind returns the rendered objects of a kind.
func (r *Rendered) ByKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// One returns the only rendered object of a kind, failing the test when there is not exactly one.
func (r *Rendered) One(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := r.ByKind(kind)
	if len(objs) != 1 {
		t.Fatalf("%d rendered objects of kind %s, want 1", len(objs), kind)
	}
	return objs[0]
}

// Kinds counts the rendered objects by kind.
func (r *Rendered) Kinds() map[string]int {
	n := map[string]int{}
	for _, o := range r.Objects {
		n[o.GetKind()]++
	}
	return n
}

// HelmTemplate returns the capabilities `helm template` renders for without --kube-version or
// --api-versions: Helm 3.20's release binary says Kubernetes 1.35 (its client-go's) and knows
// group versions only, no kinds. (The SDK's own defaults say Kubernetes 1.20, below the charts'
// kubeVersion.)
func HelmTemplate() *chartutil.Capabilities {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}
	return caps
}

// Render renders a chart as `helm install --dry-run` does, with Helm's Go SDK, for a cluster of
// the capabilities given: the values are coalesced with the chart's values.yaml and checked
// against its values.schema.json (the error of bad values is the one `helm install` prints), the
// chart's kubeVersion is checked against the cluster's, and the templates are rendered strictly
// (a missing value is an error).
func Render(t *testing.T, dir, release, namespace string, values map[string]any, caps *chartutil.Capabilities) (*Rendered, error) {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("load chart %s: %v", dir, err)
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		t.Fatalf("chart %s requires Kubernetes %s, the hub is %s", ch.Name(), ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", ch.Name(), err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	out := &Rendered{Chart: ch}
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.Notes = files[name]
			continue
		}
		objs, err := DecodeObjects([]byte(files[name]))
		if err != nil {
			t.Fatalf("%s does not render to valid YAML: %v\n%s", name, err, files[name])
		}
		out.Objects = append(out.Objects, objs...)
	}
	return out, nil
}

// MustRender renders a chart as Render does, with values the schema accepts.
func MustRender(t *testing.T, dir, release, namespace string, values map[string]any, caps *chartutil.Capabilities) *Rendered {
	t.Helper()
	r, err := Render(t, dir, release, namespace, values, caps)
	if err != nil {
		t.Fatalf("render %s with %v: %v", dir, values, err)
	}
	return r
}

// Values decodes YAML chart values (as a -f values file would give them).
func Values(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatalf("values %q: %v", y, err)
	}
	return v
}

// DecodeObjects decodes every object of a multi-document YAML stream; empty documents (a template
// whose condition is off) are skipped. Every object must have an apiVersion, a kind and a name.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := manifests.Decode(data)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("object without apiVersion, kind or name: %v", obj.Object)
		}
	}
	return objs, nil
}

// Deployment decodes the chart's one Deployment.
func Deployment(t *testing.T, r *Rendered) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(r.One(t, "Deployment").Object, dep, true); err != nil {
		t.Fatalf("the Deployment does not decode strictly: %v", err)
	}
	if n := len(dep.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return dep
}

// File reads a file of the repository (a path relative to the caller's package).
func File(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// PrometheusTestRules are the chart values of the alert rules the tests run: the defaults, but
// a rollout held a second is held long enough, so that the e2e test with a real Prometheus sees
// that alert fire, and the alerts that are off by default on.
const PrometheusTestRules = `prometheusRule: {enabled: true, alerts: {rolloutHeld: {thresholdSeconds: 1}, kyvernoUpgradeBlocked: {enabled: true}}}`

// Query is one PromQL expression the hub chart ships.
type Query struct {
	Source string // "dashboard: <panel title> (<refId>)" or "alert: <name>"
	Expr   string
}

// PromQL returns every PromQL expression the hub chart (in hubChartDir) ships: each query of the
// Grafana dashboard (dashboards/policyhub.json) with Grafana's variables replaced — $cluster by
// .* (all clusters) and $__rate_interval by rateInterval — and the expr of every alert of the
// PrometheusRule, rendered with the alert values given for a cluster of the capabilities given.
// The e2e test with a real Prometheus runs them all.
func PromQL(t *testing.T, hubChartDir, rateInterval, ruleValues string, caps *chartutil.Capabilities) []Query {
	t.Helper()
	var out []Query
	for _, p := range DashboardPanels(t, hubChartDir) {
		for _, target := range p.Targets {
			expr := strings.NewReplacer(`$cluster`, `.*`, `$__rate_interval`, rateInterval).Replace(target.Expr)
			out = append(out, Query{Source: fmt.Sprintf("dashboard: %s (%s)", p.Title, target.RefID), Expr: expr})
		}
	}
	for _, a := range AlertRules(t, hubChartDir, ruleValues, caps) {
		out = append(out, Query{Source: "alert: " + a.Alert, Expr: a.Expr})
	}
	return out
}

// DashboardPanel is the part of a Grafana panel the tests read.
type DashboardPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// DashboardPanels reads the panels of the hub chart's dashboard (rows excluded).
func DashboardPanels(t *testing.T, hubChartDir string) []DashboardPanel {
	t.Helper()
	var dash struct {
		Panels []DashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(File(t, filepath.Join(hubChartDir, "dashboards", "policyhub.json")), &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	var panels []DashboardPanel
	for _, p := range dash.Panels {
		if p.Type != "row" {
			panels = append(panels, p)
		}
	}
	return panels
}

// prometheusRuleSpec is the monitoring.coreos.com/v1 PrometheusRule spec, decoded strictly.
type prometheusRuleSpec struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []AlertRule `json:"rules"`
	} `json:"groups"`
}

// AlertRule is one alerting rule of a PrometheusRule.
type AlertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// AlertRules renders the hub chart's PrometheusRule with the alert values given, for a cluster of
// the capabilities given, and returns its rules.
func AlertRules(t *testing.T, hubChartDir, values string, caps *chartutil.Capabilities) []AlertRule {
	t.Helper()
	r := MustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", Values(t, values), caps)
	return DecodeAlertRules(t, r.One(t, "PrometheusRule"))
}

// DecodeAlertRules decodes a PrometheusRule's rules, strictly: a misspelt field fails.
func DecodeAlertRules(t *testing.T, obj *unstructured.Unstructured) []AlertRule {
	t.Helper()
	data, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec prometheusRuleSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		t.Fatalf("PrometheusRule spec: %v", err)
	}
	var rules []AlertRule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}
