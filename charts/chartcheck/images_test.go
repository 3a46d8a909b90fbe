package chartcheck

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/internal/buildinfo"
	"github.com/policyhub/policyhub/internal/charttest"
)

// With default values, each chart's Deployment runs the image `make images` builds for the
// chart's appVersion: <registry>/<command>:<appVersion> (hack/images names them the same way).
func TestChartImagesAreWhatMakeImagesBuilds(t *testing.T) {
	for _, c := range []struct {
		dir, command, values string
	}{
		{hubChartDir, "policyhub-hub", `{}`},
		{agentChartDir, "policyhub-agent", `{clusterName: cluster-1, hubKubeconfigSecret: {name: hub-kubeconfig}}`},
	} {
		data, err := os.ReadFile(filepath.Join(c.dir, "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var chart struct {
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(data, &chart); err != nil {
			t.Fatal(err)
		}
		r := charttest.MustRender(t, c.dir, c.command, "policyhub-system", charttest.Values(t, c.values), charttest.HelmTemplate())
		deployment := r.One(t, "Deployment")
		containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
		want := buildinfo.ImageReference(buildinfo.DefaultRegistry, c.command, chart.AppVersion)
		if len(containers) != 1 || containers[0].(map[string]any)["image"] != want {
			t.Errorf("%s: containers %v, want one running %s", c.dir, containers, want)
		}
	}
}
