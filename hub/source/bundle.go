package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kyverno's policy bundle, format 1 (kyverno/kyverno docs/dev/oci/bundle-spec.md, issues
// #17645, #17660, #17663): "provisional", in no Kyverno release yet (1.19.1 is the fleet's), so
// read as far as it is settled. One layer, a gzipped tarball of the policies' YAML files as
// written; a config indexing every resource in it. Only policies.kyverno.io kinds (the CEL
// policies and their exceptions) may be in a bundle; kyverno.io kinds travel in the layout
// `kyverno oci push` writes.
const (
	KyvernoBundleConfigMediaType  = "application/vnd.cncf.kyverno.bundle.config.v1+json"
	KyvernoBundleContentMediaType = "application/vnd.cncf.kyverno.bundle.content.v1.tar+gzip"
)

// maxBundleConfigBytes bounds a bundle's config, its index: a few hundred entries of a few
// hundred bytes.
const maxBundleConfigBytes = 1 << 20

// bundleConfig is what the hub reads of a bundle's config.
type bundleConfig struct {
	FormatVersion string           `json:"formatVersion"`
	Resources     []bundleResource `json:"resources"`
}

type bundleResource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// readBundle reads a policy bundle's members: every policy of its one content layer, checked as
// any member is, only policies.kyverno.io kinds, and exactly the resources its config indexes.
func readBundle(ctx context.Context, ref string, img v1.Image, manifest *v1.Manifest, limits Limits) (*Artifact, error) {
	if manifest.Config.Size > maxBundleConfigBytes {
		return nil, fmt.Errorf("%s: the bundle's config is %d bytes, over %d", ref, manifest.Config.Size, maxBundleConfigBytes)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: read the bundle's config: %w", ref, err)
	}
	var cfg bundleConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: the bundle's config: %w", ref, err)
	}
	if major, _, _ := strings.Cut(cfg.FormatVersion, "."); major != "1" {
		return nil, fmt.Errorf("%s: bundle formatVersion %q: only format 1 is read", ref, cfg.FormatVersion)
	}
	if len(manifest.Layers) != 1 || string(manifest.Layers[0].MediaType) != KyvernoBundleContentMediaType {
		return nil, fmt.Errorf("%s: a bundle has exactly one layer, of media type %s", ref, KyvernoBundleContentMediaType)
	}
	content := manifest.Layers[0]
	if content.Size > limits.MaxTotalBytes {
		return nil, fmt.Errorf("%s: the bundle's content is %d bytes, over %d", ref, content.Size, limits.MaxTotalBytes)
	}
	layer, err := img.LayerByDigest(content.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	rc, err := layer.Compressed() // the blob as stored: its digest is verified as it is read
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	defer rc.Close()
	// The registry client reads the blob only as far as the manifest's size and verifies its
	// digest at its end: read it whole (at most MaxTotalBytes, checked above) before a byte is
	// inflated, as a Flux artifact is.
	blob, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("%s: read the bundle's content: %w", ref, err)
	}
	art, err := readArchive(ctx, bytes.NewReader(blob), "", limits)
	if err != nil {
		return nil, fmt.Errorf("%s: the bundle's content: %w", ref, err)
	}
	var read, indexed []string
	for _, p := range art.Policies {
		if p.GroupVersionKind().Group != "policies.kyverno.io" {
			return nil, fmt.Errorf("%s: %s is in the bundle: a bundle holds policies.kyverno.io kinds only", ref, identity(p))
		}
		read = append(read, identity(p))
	}
	for _, r := range cfg.Resources {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(r.APIVersion)
		u.SetKind(r.Kind)
		u.SetNamespace(r.Namespace)
		u.SetName(r.Name)
		indexed = append(indexed, identity(u))
	}
	slices.Sort(read)
	slices.Sort(indexed)
	if !slices.Equal(read, indexed) {
		return nil, fmt.Errorf("%s: the bundle's content (%s) is not what its config indexes (%s)", ref, strings.Join(read, ", "), strings.Join(indexed, ", "))
	}
	return art, nil
}
