package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// A released chart runs its image by digest: the package's values pin image.repository and
// image.digest to what the OCI layout holds (the values file keeps its comments), and the
// chart renders a Deployment with <registry>/<command>@<digest>.
func TestChartsPackagedWithImagesPinned(t *testing.T) {
	const registry = "registry.example.com/platform"
	for _, name := range Charts {
		t.Run(name, func(t *testing.T) {
			idx, err := random.Index(64, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), name)
			p, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.AppendIndex(idx); err != nil {
				t.Fatal(err)
			}
			want, err := idx.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			path, digest, err := Package(filepath.Join("..", "..", "charts", name), dir, registry, out)
			if err != nil {
				t.Fatal(err)
			}
			if digest != want.String() {
				t.Errorf("pinned %s, the layout holds %s", digest, want)
			}
			ch, err := loader.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range ch.Raw {
				if f.Name == chartutil.ValuesfileName && (!strings.Contains(string(f.Data), `digest: "`+digest+`"`) || !strings.Contains(string(f.Data), "# ")) {
					t.Errorf("values.yaml of the package lacks the digest or lost its comments:\n%s", f.Data)
				}
			}
			values := map[string]any{}
			if name == "policyhub-agent" { // its two required values
				values = map[string]any{"clusterName": "cluster-1", "hubKubeconfigSecret": map[string]any{"name": "hub"}}
			}
			vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: name, Namespace: "policyhub-system"}, chartutil.DefaultCapabilities)
			if err != nil {
				t.Fatal(err)
			}
			rendered, err := engine.Render(ch, vals)
			if err != nil {
				t.Fatal(err)
			}
			image := registry + "/" + name + "@" + digest
			found := false
			for file, text := range rendered {
				if strings.HasSuffix(file, "deployment.yaml") && strings.Contains(text, `image: "`+image+`"`) {
					found = true
				}
			}
			if !found {
				t.Errorf("no Deployment of %s runs %s", name, image)
			}
		})
	}
}
