package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The manifest of a release has every archive the release workflow builds, each with its
// download URL, its checksum and the plugin's binary, in krew's Plugin schema.
func TestKrewManifest(t *testing.T) {
	const version = "v0.1.0"
	var sums strings.Builder
	want := map[string]string{}
	for i, p := range Platforms {
		sum := strings.Repeat(fmt.Sprintf("%x", i+1), 64)
		archive := Archive(version, p.OS, p.Arch)
		want[p.OS+"/"+p.Arch] = sum
		fmt.Fprintf(&sums, "%s  ./%s\n", sum, archive)
	}
	sums.WriteString(strings.Repeat("f", 64) + "  ./policyhub-hub-0.1.0.tgz\n")
	dir := t.TempDir()
	checksums := filepath.Join(dir, "checksums.txt")
	if err := os.WriteFile(checksums, []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "policyhub.yaml")
	if err := run(version, checksums, out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Version, Homepage, ShortDescription, Description string
			Platforms                                        []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, Sha256, Bin string
			}
		}
	}
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("the manifest does not decode strictly: %v\n%s", err, data)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "policyhub" ||
		m.Spec.Version != version || m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || len(m.Spec.ShortDescription) > 50 {
		t.Errorf("header %+v", m)
	}
	if len(m.Spec.Platforms) != len(Platforms) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(Platforms))
	}
	for _, p := range m.Spec.Platforms {
		key := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		archive := Archive(version, p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"])
		if p.Sha256 != want[key] || p.URI != releases+"/"+version+"/"+archive || !strings.HasPrefix(p.Bin, "kubectl-policyhub") {
			t.Errorf("platform %s: %+v", key, p)
		}
	}
	// The release workflow builds the same archives.
	workflow, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Platforms {
		if !strings.Contains(string(workflow), p.OS+"/"+p.Arch) {
			t.Errorf("the release workflow does not build %s/%s", p.OS, p.Arch)
		}
	}
	if !strings.Contains(string(workflow), "kubectl-policyhub_${version}_${os}_${arch}") {
		t.Error("the release workflow names its archives otherwise than Archive")
	}
	if _, err := Manifest("0.1.0", nil); err == nil {
		t.Error("a version without the v of a tag was accepted")
	}
}
