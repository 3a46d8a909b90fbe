package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyhub/policyhub/internal/archivetest"
)

// These tests fetch artifacts from an HTTP file server, as source-controller serves its
// artifacts (a plain http.FileServer of its storage), laid out as a Git repository of policies
// in the Flux + Kyverno layout: one folder per environment.

// file is one entry of a tarball: a regular file, or a symlink to link.
type file struct {
	name, content, link string
}

// tarball is a gzipped tarball of files.
func tarball(t testing.TB, files ...file) []byte {
	t.Helper()
	entries := make([]archivetest.File, 0, len(files))
	for _, f := range files {
		entries = append(entries, archivetest.File{Name: f.name, Content: f.content, Link: f.link})
	}
	return archivetest.Tarball(t, entries...)
}

// serve serves data as the artifact at /gitrepository/flux-system/policies/<sum>.tar.gz, as
// source-controller stores it, and returns its URL and digest.
func serve(t *testing.T, data []byte) (url, digest string) {
	t.Helper()
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	name := filepath.Join("gitrepository", "flux-system", "policies", hex.EncodeToString(sum[:])+".tar.gz")
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.ToSlash(name), "sha256:" + hex.EncodeToString(sum[:])
}

const validatingPolicy = `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: disallow-host-path
spec:
  validationActions: [Audit]
  validations:
  - expression: "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))"
`

// The policies under a folder, recursively, one or more a file; what is not a Kyverno policy is
// counted and left out; another folder, a link and a non-YAML file are not read.
func TestFetchArchiveTakesThePoliciesUnderItsFolder(t *testing.T) {
	url, digest := serve(t, tarball(t,
		file{name: "clusters/staging/require-labels.yaml", content: clusterPolicy("require-labels").yaml},
		file{name: "clusters/staging/pss.yaml", content: validatingPolicy + "---\n# a comment only\n---\napiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: limits, namespace: shop}\nspec: {rules: []}\n"},
		file{name: "clusters/staging/kustomization.yaml", content: "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [pss.yaml]\n"},
		file{name: "clusters/staging/nested/extra.yml", content: clusterPolicy("extra").yaml},
		file{name: "clusters/staging/README.md", content: "kind: ClusterPolicy"},
		file{name: "clusters/staging/linked.yaml", link: "../production/enforce.yaml"},
		file{name: "clusters/production/enforce.yaml", content: clusterPolicy("enforce-only-in-production").yaml},
	))
	art, err := FetchArchive(context.Background(), http.DefaultClient, url, digest, "clusters/staging", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range art.Policies {
		got = append(got, identity(p))
		if _, ok := p.Object["status"]; ok {
			t.Errorf("%s kept its status", identity(p))
		}
	}
	want := "[ClusterPolicy extra ClusterPolicy require-labels Policy shop/limits ValidatingPolicy disallow-host-path]"
	if fmt.Sprint(got) != want {
		t.Errorf("policies %v, want %s", got, want)
	}
	if art.Skipped != 1 || !strings.HasPrefix(art.Digest, "sha256:") || art.Digest == digest {
		t.Errorf("skipped %d (want the kustomization), digest %s (want the policies' own, not the artifact's %s)", art.Skipped, art.Digest, digest)
	}
	// Another folder's change is no new version of this one's policies.
	url2, digest2 := serve(t, tarball(t,
		file{name: "clusters/staging/require-labels.yaml", content: clusterPolicy("require-labels").yaml},
		file{name: "clusters/staging/pss.yaml", content: validatingPolicy + "---\n# a comment only\n---\napiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: limits, namespace: shop}\nspec: {rules: []}\n"},
		file{name: "clusters/staging/nested/extra.yml", content: clusterPolicy("extra").yaml},
		file{name: "clusters/production/enforce.yaml", content: clusterPolicy("enforce-only-in-production").yaml + "# changed\n"},
	))
	again, err := FetchArchive(context.Background(), http.DefaultClient, url2, digest2, "clusters/staging", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != art.Digest || digest2 == digest {
		t.Errorf("a commit outside the folder: digest %s, want the same %s", again.Digest, art.Digest)
	}
	for _, dir := range []string{"/clusters/staging/", "./clusters/staging"} {
		if again, err := FetchArchive(context.Background(), http.DefaultClient, url, digest, dir, DefaultLimits); err != nil || len(again.Policies) != 4 {
			t.Errorf("dir %q: %v, %d policies; want the same 4", dir, err, len(again.Policies))
		}
	}
	whole, err := FetchArchive(context.Background(), http.DefaultClient, url, digest, "", DefaultLimits)
	if err != nil || len(whole.Policies) != 5 {
		t.Errorf("the whole archive: %v, %d policies; want 5", err, len(whole.Policies))
	}
}

// What cannot be trusted or is over limits is refused with the reason, and nothing is returned.
func TestFetchArchiveRefuses(t *testing.T) {
	good := tarball(t, file{name: "p/a.yaml", content: clusterPolicy("a").yaml})
	url, digest := serve(t, good)
	otherDigest := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name        string
		data        []byte // served instead of good, with its own digest
		url, digest string
		dir         string
		limits      Limits
		want        string
	}{
		{name: "a digest that does not match", digest: otherDigest, want: "does not match its digest"},
		{name: "an unsupported digest algorithm", digest: "blake3:" + strings.Repeat("0", 64), want: `digest algorithm "blake3" is not supported`},
		{name: "a malformed digest", digest: "sha256:xyz", want: "not a sha256 sum"},
		{name: "a folder climbing out", dir: "p/../..", want: "may not contain '..'"},
		{name: "a missing artifact (garbage-collected)", url: url + ".gone", want: "404"},
		{name: "an archive over the limit", limits: Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 100}, want: "over 100 bytes"},
		{name: "not a tarball", data: []byte("<html>not found</html>"), want: "not a gzipped tarball"},
		{name: "a file over the limit", data: tarball(t, file{name: "p/a.yaml", content: clusterPolicy("a").yaml + "#" + strings.Repeat("x", 4096)}),
			limits: Limits{MaxPolicies: 10, MaxPolicyBytes: 4096, MaxTotalBytes: 1 << 20}, want: "p/a.yaml is"},
		{name: "more policies than the limit", data: tarball(t, file{name: "p/a.yaml", content: clusterPolicy("a").yaml + "---\n" + clusterPolicy("b").yaml}),
			limits: Limits{MaxPolicies: 1, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20}, want: "more than 1 policies"},
		{name: "a policy twice", data: tarball(t, file{name: "p/a.yaml", content: clusterPolicy("a").yaml}, file{name: "p/copy.yaml", content: clusterPolicy("a").yaml}),
			want: "ClusterPolicy a is in p/a.yaml and p/copy.yaml"},
		{name: "a Kyverno object that is not a valid policy", data: tarball(t, file{name: "p/bad.yaml", content: "apiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: no-namespace}\nspec: {}\n"}),
			want: "p/bad.yaml: document 1: Policy \"no-namespace\": metadata.namespace is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, d := url, digest
			if tc.data != nil {
				u, d = serve(t, tc.data)
			}
			if tc.url != "" {
				u = tc.url
			}
			if tc.digest != "" {
				d = tc.digest
			}
			limits := tc.limits
			if limits == (Limits{}) {
				limits = DefaultLimits
			}
			dir := tc.dir
			if dir == "" {
				dir = "p"
			}
			art, err := FetchArchive(context.Background(), http.DefaultClient, u, d, dir, limits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if art != nil {
				t.Errorf("returned %+v with the error", art)
			}
		})
	}
}
