package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// The charts, relative to this package.
const (
	hubChartDir   = "../charts/policyhub-hub"
	agentChartDir = "../charts/policyhub-agent"
)

// renderedChart is what `helm install` would send: the templates' objects (CRDs apart) and the
// rendered NOTES.txt.
type renderedChart struct {
	chart   *chart.Chart
	objects []*unstructured.Unstructured
	notes   string
}

// byKind returns the rendered objects of a kind.
func (r *renderedChart) byKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only rendered object of a kind, failing the test when there is not exactly one.
func (r *renderedChart) one(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := r.byKind(kind)
	if len(objs) != 1 {
		t.Fatalf("%d rendered objects of kind %s, want 1", len(objs), kind)
	}
	return objs[0]
}

// kinds counts the rendered objects by kind.
func (r *renderedChart) kinds() map[string]int {
	n := map[string]int{}
	for _, o := range r.objects {
		n[o.GetKind()]++
	}
	return n
}

// renderChart renders a chart as `helm install --dry-run` does, with Helm's Go SDK: the values are
// coalesced with the chart's values.yaml and checked against its values.schema.json (the error
// of bad values is the one `helm install` prints), the chart's kubeVersion is checked against the
// hub's, and the templates are rendered strictly (a missing value is an error).
func renderChart(t *testing.T, dir, release, namespace string, values map[string]any) (*renderedChart, error) {
	t.Helper()
	return renderChartFor(t, dir, release, namespace, values, hubCapabilities(t))
}

// renderChartFor renders a chart as renderChart does, for a cluster of the capabilities given.
func renderChartFor(t *testing.T, dir, release, namespace string, values map[string]any, caps *chartutil.Capabilities) (*renderedChart, error) {
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
	out := &renderedChart{chart: ch}
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = files[name]
			continue
		}
		objs, err := chartDecodeObjects([]byte(files[name]))
		if err != nil {
			t.Fatalf("%s does not render to valid YAML: %v\n%s", name, err, files[name])
		}
		out.objects = append(out.objects, objs...)
	}
	return out, nil
}

// mustRender renders a chart with values the schema accepts.
func mustRender(t *testing.T, dir, release, namespace string, values map[string]any) *renderedChart {
	t.Helper()
	r, err := renderChart(t, dir, release, namespace, values)
	if err != nil {
		t.Fatalf("render %s with %v: %v", dir, values, err)
	}
	return r
}

// chartValues decodes YAML chart values (as a -f values file would give them).
func chartValues(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatalf("values %q: %v", y, err)
	}
	return v
}

// chartDecodeObjects decodes every object of a multi-document YAML stream; empty documents (a template
// whose condition is off) are skipped. Every object must have an apiVersion, a kind and a name.
func chartDecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := fleet.DecodeObjects(data)
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

var (
	hubCapsOnce sync.Once
	hubCaps     *chartutil.Capabilities
	hubCapsErr  error
)

// hubCapabilities are Helm's capabilities of the fleet's hub (its Kubernetes version); Helm's
// defaults without a fleet.
func hubCapabilities(t *testing.T) *chartutil.Capabilities {
	t.Helper()
	if testFleet == nil {
		return chartutil.DefaultCapabilities
	}
	hubCapsOnce.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(testFleet.Hub.Config)
		if err != nil {
			hubCapsErr = err
			return
		}
		v, err := dc.ServerVersion()
		if err != nil {
			hubCapsErr = err
			return
		}
		caps := chartutil.DefaultCapabilities.Copy()
		caps.KubeVersion = chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor}
		// The APIs the hub serves, as `helm install` learns them (templates gate on them).
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			hubCapsErr = err
			return
		}
		versions := map[string]bool{}
		for _, list := range lists {
			versions[list.GroupVersion] = true
			for _, r := range list.APIResources {
				versions[list.GroupVersion+"/"+r.Kind] = true
			}
		}
		caps.APIVersions = nil
		for v := range versions {
			caps.APIVersions = append(caps.APIVersions, v)
		}
		hubCaps = caps
	})
	if hubCapsErr != nil {
		t.Fatalf("the hub's version: %v", hubCapsErr)
	}
	return hubCaps
}

// chartWarnings records the warnings an apiserver returns (PodSecurity's, deprecations).
type chartWarnings struct {
	mu       sync.Mutex
	warnings []string
}

func (w *chartWarnings) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, message)
}

// take returns the warnings recorded since the last take.
func (w *chartWarnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// chartWarningClient is an admin client of a cluster whose requests' warnings are collected.
func chartWarningClient(t *testing.T, cfg *rest.Config) (client.Client, *chartWarnings) {
	t.Helper()
	w := &chartWarnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// chartDryRunApply server-side applies obj with dryRun=All, as `helm install` would create it: the
// apiserver runs defaulting, schema validation and admission (PodSecurity among them) and stores
// nothing. The field manager is helm's.
func chartDryRunApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
		client.FieldOwner("helm"), client.ForceOwnership, client.DryRunAll)
}

// chartQuery is one PromQL expression the hub chart ships.
type chartQuery struct {
	Source string // "dashboard: <panel title> (<refId>)" or "alert: <name>"
	Expr   string
}

// chartPromQL returns every PromQL expression the hub chart ships: each query of the Grafana
// dashboard (charts/policyhub-hub/dashboards/policyhub.json) with Grafana's variables replaced —
// $cluster by .* (all clusters) and $__rate_interval by rateInterval — and the expr of every
// alert of the PrometheusRule, rendered with the chart's default alert values. The e2e test with
// a real Prometheus runs them all.
func chartPromQL(t *testing.T, rateInterval, ruleValues string) []chartQuery {
	t.Helper()
	var out []chartQuery
	for _, p := range dashboardPanels(t) {
		for _, target := range p.Targets {
			expr := strings.NewReplacer(`$cluster`, `.*`, `$__rate_interval`, rateInterval).Replace(target.Expr)
			out = append(out, chartQuery{Source: fmt.Sprintf("dashboard: %s (%s)", p.Title, target.RefID), Expr: expr})
		}
	}
	for _, a := range alertRules(t, ruleValues) {
		out = append(out, chartQuery{Source: "alert: " + a.Alert, Expr: a.Expr})
	}
	return out
}

// dashboardPanel is the part of a Grafana panel the tests read.
type dashboardPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// dashboardPanels reads the panels of the chart's dashboard (rows excluded).
func dashboardPanels(t *testing.T) []dashboardPanel {
	t.Helper()
	var dash struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(chartFile(t, filepath.Join(hubChartDir, "dashboards", "policyhub.json")), &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	var panels []dashboardPanel
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
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules renders the hub chart's PrometheusRule with the default alert values and returns
// its rules.
func alertRules(t *testing.T, values string) []alertRule {
	t.Helper()
	r := mustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", chartValues(t, values))
	return decodeAlertRules(t, r.one(t, "PrometheusRule"))
}

// decodeAlertRules decodes a PrometheusRule's rules, strictly: a misspelt field fails.
func decodeAlertRules(t *testing.T, obj *unstructured.Unstructured) []alertRule {
	t.Helper()
	data, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec prometheusRuleSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		t.Fatalf("PrometheusRule spec: %v", err)
	}
	var rules []alertRule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// chartRunFlags runs a binary with the args of a rendered container and -h last: Go's flag package
// parses every argument before -h, so it exits 0 only when each flag exists and its value parses
// (durations, numbers, booleans, zap's levels).
func chartRunFlags(t *testing.T, binary string, args []string) {
	t.Helper()
	cmd := exec.Command(binary, append(append([]string{}, args...), "-h")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s refuses the chart's arguments %q: %v\n%s", filepath.Base(binary), args, err, out)
	}
}

// chartBuildCommand builds ./cmd/<name> into dir.
func chartBuildCommand(t *testing.T, dir, name string) string {
	t.Helper()
	binary := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", binary, "./cmd/"+name)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return binary
}

// chartFile reads a file of the repository (a path relative to this package).
func chartFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// metricNameRE and friends pick the metric names and label names out of PromQL.
var (
	metricNameRE = regexp.MustCompile(`\bpolicyhub_[a-z_]+`)
	byClauseRE   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherRE    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	selectorRE   = regexp.MustCompile(`policyhub_[a-z_]+\{([^}]*)\}`)
)
