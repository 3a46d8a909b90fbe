package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/internal/charttest"
)

// The charts, relative to this package.
const (
	hubChartDir   = "../charts/policyhub-hub"
	agentChartDir = "../charts/policyhub-agent"
)

// renderChart renders a chart as charttest.Render does, for the fleet's hub (hubCapabilities).
func renderChart(t *testing.T, dir, release, namespace string, values map[string]any) (*charttest.Rendered, error) {
	t.Helper()
	return charttest.Render(t, dir, release, namespace, values, hubCapabilities(t))
}

// mustRender renders a chart for the fleet's hub with values the schema accepts.
func mustRender(t *testing.T, dir, release, namespace string, values map[string]any) *charttest.Rendered {
	t.Helper()
	return charttest.MustRender(t, dir, release, namespace, values, hubCapabilities(t))
}

// alertRules renders the hub chart's PrometheusRule for the fleet's hub with the alert values
// given and returns its rules.
func alertRules(t *testing.T, values string) []charttest.AlertRule {
	t.Helper()
	return charttest.AlertRules(t, hubChartDir, values, hubCapabilities(t))
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
		dc, err := discovery.NewDiscoveryClientForConfig(fleetOf(t).Hub.Config)
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
