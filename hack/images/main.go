// Command images builds policyhub's container images without Docker: each command of Binaries,
// cross-compiled static for every platform, on an empty base, as an OCI image index written to
// an OCI layout (and, with -push, to a registry). The tag is the charts' appVersion, so the charts'
// default image references are what it builds. The same commit gives the same digests.
//
//	go run ./hack/images [-out _output/images] [-registry ghcr.io/policyhub] [-push]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	out := flag.String("out", "_output/images", "Directory of the OCI layouts written, one per image.")
	registry := flag.String("registry", buildinfo.DefaultRegistry, "Registry and path the images are named under: <registry>/<command>:<appVersion>.")
	push := flag.Bool("push", false, "Push the images to -registry (credentials from the Docker config, as docker login leaves them) and print their digests.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Platforms to build, comma-separated.")
	flag.Parse()

	root, err := os.Getwd()
	if err != nil {
		return err
	}
	b, err := BuildOfCheckout(ctx, root)
	if err != nil {
		return err
	}
	if b.Platforms, err = ParsePlatforms(*platforms); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "policyhub-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fmt.Printf("building %s at %s (%s) for %s\n", b.Version, b.Commit, b.Date.Format(time.RFC3339), *platforms)
	for _, bin := range Binaries {
		start := time.Now()
		idx, err := b.Index(ctx, bin, work)
		if err != nil {
			return err
		}
		ref, err := name.NewTag(buildinfo.ImageReference(*registry, bin, b.Version))
		if err != nil {
			return fmt.Errorf("image name: %w", err)
		}
		if err := WriteLayout(filepath.Join(*out, bin), idx, ref); err != nil {
			return err
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		if err := printImage(ref, digest, idx, time.Since(start)); err != nil {
			return err
		}
		if *push {
			if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
		}
	}
	return nil
}

// WriteLayout writes the index to an OCI layout at dir (replacing what was there), annotated with
// its reference.
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()}))
}

func printImage(ref name.Tag, digest v1.Hash, idx v1.ImageIndex, took time.Duration) error {
	manifest, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s (%s)\n", ref, digest, took.Round(time.Second))
	for _, m := range manifest.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		var size int64
		for _, l := range layers {
			s, err := l.Size()
			if err != nil {
				return err
			}
			size += s
		}
		fmt.Printf("  %s/%s  %s  %.1f MiB compressed\n", m.Platform.OS, m.Platform.Architecture, m.Digest, float64(size)/(1<<20))
	}
	return nil
}

// BuildOfCheckout reads what the build is of: the charts' appVersion (both charts must agree),
// and the checkout's commit and its time. A checkout with uncommitted changes is stamped
// <commit>-dirty: its images are not the commit's.
func BuildOfCheckout(ctx context.Context, root string) (Build, error) {
	var version string
	for _, chart := range []string{"policyhub-hub", "policyhub-agent"} {
		data, err := os.ReadFile(filepath.Join(root, "charts", chart, "Chart.yaml"))
		if err != nil {
			return Build{}, err
		}
		var c struct {
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(data, &c); err != nil || c.AppVersion == "" {
			return Build{}, fmt.Errorf("charts/%s/Chart.yaml: no appVersion (%v)", chart, err)
		}
		if version != "" && c.AppVersion != version {
			return Build{}, fmt.Errorf("the charts' appVersions differ (%s, %s): the images have one version", version, c.AppVersion)
		}
		version = c.AppVersion
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, exit.Stderr)
			}
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return Build{}, err
	}
	when, err := git("log", "-1", "--format=%cI")
	if err != nil {
		return Build{}, err
	}
	date, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return Build{}, fmt.Errorf("commit time %q: %w", when, err)
	}
	if status, err := git("status", "--porcelain", "--untracked-files=no"); err != nil {
		return Build{}, err
	} else if status != "" {
		commit += "-dirty"
	}
	return Build{Root: root, Version: version, Commit: commit, Date: date}, nil
}
