// Command release packages the charts of a release with their images pinned by digest: each
// chart's image.repository is <registry>/<command> and image.digest the digest `make images`
// built (read from its OCI layout), and the chart goes into a .tgz (helm package) ready for
// `helm push ... oci://`. The values file keeps its comments: only those two lines change.
//
//	go run ./hack/release [-images _output/images] [-registry ghcr.io/policyhub] [-out _output/charts]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

// Charts are the released charts, each named after the command whose image it runs.
var Charts = []string{"policyhub-hub", "policyhub-agent"}

func main() {
	images := flag.String("images", "_output/images", "Where `make images` wrote the images' OCI layouts.")
	registry := flag.String("registry", buildinfo.DefaultRegistry, "Registry and path the images are pushed under (make push REGISTRY=...).")
	out := flag.String("out", "_output/charts", "Where the packaged charts go.")
	flag.Parse()
	for _, name := range Charts {
		path, digest, err := Package(filepath.Join("charts", name), filepath.Join(*images, name), *registry, *out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "release: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("%s: image %s/%s@%s\n", path, *registry, name, digest)
	}
}

// Package packages the chart at dir into outDir with its image pinned to the image index in the
// OCI layout at imageLayout, under registry; it returns the package's path and the digest.
func Package(dir, imageLayout, registry, outDir string) (string, string, error) {
	p, err := layout.FromPath(imageLayout)
	if err != nil {
		return "", "", fmt.Errorf("%s: run make images first: %w", imageLayout, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", "", err
	}
	manifest, err := top.IndexManifest()
	if err != nil {
		return "", "", err
	}
	if len(manifest.Manifests) != 1 {
		return "", "", fmt.Errorf("%s holds %d images, want the one make images writes", imageLayout, len(manifest.Manifests))
	}
	digest := manifest.Manifests[0].Digest.String()
	ch, err := loader.Load(dir)
	if err != nil {
		return "", "", err
	}
	repository := registry + "/" + ch.Name()
	if err := pinImage(ch, repository, digest); err != nil {
		return "", "", fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", "", err
	}
	path, err := chartutil.Save(ch, outDir)
	return path, digest, err
}

var (
	repositoryLine = regexp.MustCompile(`(?m)^  repository: .*$`)
	digestLine     = regexp.MustCompile(`(?m)^  digest: .*$`)
)

// pinImage sets image.repository and image.digest in the chart's values, and in its values file
// (the two lines under image:, which are the only ones so indented with those keys).
func pinImage(ch *chart.Chart, repository, digest string) error {
	image, ok := ch.Values["image"].(map[string]any)
	if !ok {
		return fmt.Errorf("no image values")
	}
	image["repository"], image["digest"] = repository, digest
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if len(repositoryLine.FindAll(f.Data, -1)) != 1 || len(digestLine.FindAll(f.Data, -1)) != 1 {
			return fmt.Errorf("values.yaml: want exactly one image repository and digest line")
		}
		f.Data = repositoryLine.ReplaceAll(f.Data, []byte("  repository: "+repository))
		f.Data = digestLine.ReplaceAll(f.Data, []byte(`  digest: "`+digest+`"`))
		return nil
	}
	return fmt.Errorf("no values.yaml")
}
