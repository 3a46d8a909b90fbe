package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

// nonRoot is the user and group the images run as (distroless' nonroot).
const nonRoot = "65532:65532"

// source is the project's repository, for the images' OCI labels.
const source = "https://github.com/policyhub/policyhub"

// Binaries are the commands shipped as images.
var Binaries = []string{"policyhub-hub", "policyhub-agent"}

// Build says what to build: which commit, stamped how, for which platforms.
type Build struct {
	// Root is the checkout.
	Root string
	// Version is the images' tag and the binaries' version (the charts' appVersion).
	Version string
	// Commit and Date stamp the binaries and label the images; Date (the commit's time) is also
	// every timestamp in the images, so the same commit gives the same digests.
	Commit string
	Date   time.Time
	// Platforms are os/arch pairs.
	Platforms []v1.Platform
}

// binary cross-compiles cmd/name for the platform into dir: static (no cgo), without local paths
// or VCS stamps that would make two builds of one commit differ.
func (b Build) binary(ctx context.Context, name string, p v1.Platform, dir string) (string, error) {
	out := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", name, p.OS, p.Architecture))
	ldflags := "-s -w " + buildinfo.LDFlags(b.Version, b.Commit, b.Date.UTC().Format(time.RFC3339))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/"+name)
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s for %s/%s: %w\n%s", name, p.OS, p.Architecture, err, output)
	}
	return out, nil
}

// image is one platform's image of a binary: an empty base and one layer holding the binary at
// /<name>, run as a non-root user, every timestamp the commit's.
func (b Build) image(name string, binary []byte, p v1.Platform) (v1.Image, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{
		Name: name, Typeflag: tar.TypeReg, Mode: 0o555, Size: int64(len(binary)), ModTime: b.Date.UTC(), Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", name, err)
	}
	created := v1.Time{Time: b.Date.UTC()}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "hack/images: " + name + " " + b.Version, Comment: "the static binary"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = created
	cfg.Config.User = nonRoot
	cfg.Config.Entrypoint = []string{"/" + name}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = b.labels(name)
	return mutate.ConfigFile(img, cfg)
}

// labels are the images' OCI annotations (as config labels, where `docker inspect` and
// registries show them).
func (b Build) labels(name string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    name,
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  b.Version,
		"org.opencontainers.image.revision": b.Commit,
		"org.opencontainers.image.created":  b.Date.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Index builds the multi-platform image of a binary: one image per platform, in an OCI index.
func (b Build) Index(ctx context.Context, name, workDir string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range b.Platforms {
		path, err := b.binary(ctx, name, p, workDir)
		if err != nil {
			return nil, err
		}
		binary, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		img, err := b.image(name, binary, p)
		if err != nil {
			return nil, err
		}
		platform := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform, MediaType: types.OCIManifestSchema1}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(p), "/")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("platform %q: want os/arch or os/arch/variant", p)
		}
		platform := v1.Platform{OS: parts[0], Architecture: parts[1]}
		if len(parts) == 3 {
			platform.Variant = parts[2]
		}
		out = append(out, platform)
	}
	return out, nil
}
