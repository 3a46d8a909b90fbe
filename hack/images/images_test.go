package main

import (
	"archive/tar"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The images of this checkout, built for amd64 and arm64 without Docker, are the same on a second
// build, go through a real OCI registry (go-containerregistry's, in this process) and come back
// with both platforms, a non-root user, the binary as entrypoint and the OCI labels; the amd64
// binary taken out of its layer answers --version with the charts' appVersion and the commit.
func TestImagesBuildPushPullRun(t *testing.T) {
	ctx := t.Context()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildOfCheckout(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if b.Platforms, err = ParsePlatforms("linux/amd64,linux/arm64"); err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(server.Close)
	host := strings.TrimPrefix(server.URL, "http://")

	for _, bin := range Binaries {
		t.Run(bin, func(t *testing.T) {
			idx, err := b.Index(ctx, bin, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			digest, err := idx.Digest()
			if err != nil {
				t.Fatal(err)
			}
			again, err := b.Index(ctx, bin, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if d, err := again.Digest(); err != nil || d != digest {
				t.Errorf("a second build of the same commit is %s (%v), the first %s: not reproducible", d, err, digest)
			}

			ref, err := name.NewTag(host+"/policyhub/"+bin+":"+b.Version, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), bin)
			if err := WriteLayout(dir, idx, ref); err != nil {
				t.Fatal(err)
			}
			if _, err := layout.ImageIndexFromPath(dir); err != nil {
				t.Errorf("the OCI layout %s does not read back: %v", dir, err)
			}
			if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
				t.Fatalf("push %s: %v", ref, err)
			}
			pulled, err := remote.Index(ref, remote.WithContext(ctx))
			if err != nil {
				t.Fatalf("pull %s: %v", ref, err)
			}
			if d, err := pulled.Digest(); err != nil || d != digest {
				t.Errorf("pulled %s (%v), pushed %s", d, err, digest)
			}
			manifest, err := pulled.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			arches := map[string]v1.Hash{}
			for _, m := range manifest.Manifests {
				if m.Platform == nil || m.Platform.OS != "linux" {
					t.Errorf("manifest %s: platform %v, want linux", m.Digest, m.Platform)
					continue
				}
				arches[m.Platform.Architecture] = m.Digest
			}
			if len(arches) != 2 || arches["amd64"] == (v1.Hash{}) || arches["arm64"] == (v1.Hash{}) {
				t.Fatalf("platforms %v, want linux/amd64 and linux/arm64", arches)
			}
			for arch, d := range arches {
				img, err := pulled.Image(d)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				c := cfg.Config
				if cfg.Architecture != arch || c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/"+bin {
					t.Errorf("%s config: architecture %s, user %q, entrypoint %v; want %s, 65532:65532, [/%s]", arch, cfg.Architecture, c.User, c.Entrypoint, arch, bin)
				}
				for label, want := range map[string]string{
					"org.opencontainers.image.source":   "https://github.com/policyhub/policyhub",
					"org.opencontainers.image.version":  b.Version,
					"org.opencontainers.image.revision": b.Commit,
				} {
					if got := c.Labels[label]; got != want {
						t.Errorf("%s label %s = %q, want %q", arch, label, got, want)
					}
				}
				if arch == runtime.GOARCH {
					runVersion(t, img, bin, b)
				}
			}
		})
	}
}

// runVersion takes the binary out of the image's filesystem and runs it with --version.
func runVersion(t *testing.T, img v1.Image, bin string, b Build) {
	t.Helper()
	fs := mutate.Extract(img)
	defer fs.Close()
	tr := tar.NewReader(fs)
	path := filepath.Join(t.TempDir(), bin)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no /%s in the image", bin)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != bin {
			continue
		}
		if h.Mode&0o111 == 0 {
			t.Errorf("/%s has mode %o: not executable", bin, h.Mode)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		break
	}
	out, err := exec.CommandContext(t.Context(), path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	t.Logf("%s --version: %s", bin, strings.TrimSpace(string(out)))
	for _, want := range []string{bin, b.Version, "commit " + b.Commit, "built " + b.Date.UTC().Format(time.RFC3339), "go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s --version says %q; want it to contain %q", bin, out, want)
		}
	}
}
