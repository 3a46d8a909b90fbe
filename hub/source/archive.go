package source

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// FetchArchive reads the policies of a Flux source's artifact (a GitRepository, Bucket or
// OCIRepository, as its status.artifact names it: url and digest): it downloads the tarball,
// bounded by limits.MaxTotalBytes, verifies the digest before reading a byte of it, and takes
// every Kyverno policy (any kind of kyverno.io or policies.kyverno.io a FleetPolicy's template
// may be) and every Gatekeeper template and Constraint (a library such as Gatekeeper's own keeps
// each template beside sample Constraints) in the .yaml and .yml files under dir, recursively, each file one or more documents.
// Documents that are not Kyverno policies (a kustomization.yaml, other manifests) are left out
// and counted; links are not followed. A policy twice, a file or the set over limits, or a
// document that is a Kyverno object but not a valid policy is an error naming it. The artifact's
// Digest is the sha256 of the policies taken.
func FetchArchive(ctx context.Context, client *http.Client, url, digest, dir string, limits Limits) (*Artifact, error) {
	verifier, want, err := digestOf(digest)
	if err != nil {
		return nil, err
	}
	root, err := cleanDir(dir)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download the artifact: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download the artifact %s: %s", url, resp.Status)
	}
	var archive bytes.Buffer
	n, err := io.Copy(io.MultiWriter(&archive, verifier), io.LimitReader(resp.Body, limits.MaxTotalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download the artifact %s: %w", url, err)
	}
	if n > limits.MaxTotalBytes {
		return nil, fmt.Errorf("the artifact %s is over %d bytes", url, limits.MaxTotalBytes)
	}
	if got := hex.EncodeToString(verifier.Sum(nil)); got != want {
		return nil, fmt.Errorf("the artifact %s does not match its digest: it is %s:%s, the source says %s", url, strings.SplitN(digest, ":", 2)[0], got, digest)
	}
	art, err := readArchive(ctx, &archive, root, limits)
	if err != nil {
		return nil, fmt.Errorf("the artifact %s: %w", url, err)
	}
	// Pinned by the policies taken, not the artifact: a commit that changes nothing under dir
	// (another environment's folder) is no new version of the set.
	return art.sealed()
}

// digestOf is the hash a digest ("algorithm:hex") names and its hex; Flux's default is sha256.
func digestOf(digest string) (hash.Hash, string, error) {
	algorithm, hexSum, ok := strings.Cut(digest, ":")
	var h hash.Hash
	switch algorithm {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	default:
		if !ok {
			return nil, "", fmt.Errorf("digest %q: want algorithm:hex, e.g. sha256:…", digest)
		}
		return nil, "", fmt.Errorf("digest algorithm %q is not supported: sha256, sha384 or sha512 (source-controller's --artifact-digest-algo)", algorithm)
	}
	if _, err := hex.DecodeString(hexSum); err != nil || len(hexSum) != 2*h.Size() {
		return nil, "", fmt.Errorf("digest %q: not a %s sum", digest, algorithm)
	}
	return h, strings.ToLower(hexSum), nil
}

// cleanDir is dir as a prefix of the archive's paths ("" for the whole archive); it may not
// climb out of it.
func cleanDir(dir string) (string, error) {
	if slices.Contains(strings.Split(dir, "/"), "..") {
		return "", fmt.Errorf("path %q: may not contain '..'", dir)
	}
	clean := strings.TrimPrefix(path.Clean("/"+dir), "/")
	if clean == "" {
		return "", nil
	}
	return clean + "/", nil
}

// maxInflatedBytes bounds what a gzipped tarball may inflate to, every byte counted: the files
// taken, the files skipped (other folders, other file types), the tar headers and padding. The
// YAML taken is bounded by MaxTotalBytes already; a Git repository's artifact holds more than its
// policies (docs, other environments' folders), so the rest gets three times that. With the
// defaults: 64 MiB, a quarter of a second of inflating, where a 16 MiB artifact of zeros would
// inflate to 16 GiB.
func maxInflatedBytes(limits Limits) int64 { return 4 * limits.MaxTotalBytes }

// readArchive takes the policies of a gzipped tarball's YAML files under root. It inflates at
// most maxInflatedBytes and stops when ctx is done.
func readArchive(ctx context.Context, r io.Reader, root string, limits Limits) (*Artifact, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzipped tarball: %w", err)
	}
	defer gz.Close()
	inflated := &inflateBound{ctx: ctx, r: gz, left: maxInflatedBytes(limits), bound: maxInflatedBytes(limits)}
	art, err := readTar(tar.NewReader(inflated), root, limits)
	if inflated.err != nil {
		// Whatever the tar reader made of it: the bound or the context stopped the read.
		return nil, inflated.err
	}
	return art, err
}

// readTar takes the policies of a tarball's YAML files under root.
func readTar(tr *tar.Reader, root string, limits Limits) (*Artifact, error) {
	art := &Artifact{}
	seen := map[string]string{}
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the tarball: %w", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if hdr.Typeflag != tar.TypeReg || !strings.HasPrefix(name, root) ||
			(!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue // directories, links, other files, other folders: inflated and counted all the same
		}
		if hdr.Size > limits.MaxPolicyBytes {
			return nil, fmt.Errorf("%s is %d bytes, over the %d a file may have", name, hdr.Size, limits.MaxPolicyBytes)
		}
		if total += hdr.Size; total > limits.MaxTotalBytes {
			return nil, fmt.Errorf("its YAML files under %q are over %d bytes", root, limits.MaxTotalBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, limits.MaxPolicyBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if err := art.takeFile(data, name, seen, limits.MaxPolicies); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(art.Policies, func(a, b *unstructured.Unstructured) int { return strings.Compare(identity(a), identity(b)) })
	return art, nil
}

// inflateBound reads what gzip inflates, at most bound bytes in all, while ctx is not done:
// the tar reader skips an entry by reading it through, so every byte is counted here.
type inflateBound struct {
	ctx         context.Context
	r           io.Reader
	left, bound int64
	// err is why the read was stopped: over the bound, or ctx done.
	err error
}

func (b *inflateBound) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if err := b.ctx.Err(); err != nil {
		b.err = fmt.Errorf("reading the tarball stopped: %w", context.Cause(b.ctx))
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one byte past the bound says there is more
	}
	n, err := b.r.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.err = fmt.Errorf("the tarball inflates to more than %d bytes (%d MiB, four times the %d bytes of policies a set may hold): refused, read no further",
			b.bound, b.bound>>20, b.bound/4)
		return 0, b.err
	}
	return n, err
}

// takeFile adds the Kyverno policies of one YAML file (where names it, seen names where each
// policy taken so far came from) and counts its other documents: a policy twice, or more than
// max in all, is an error.
func (a *Artifact) takeFile(data []byte, where string, seen map[string]string, max int) error {
	policies, skipped, err := policiesIn(data)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	a.Skipped += skipped
	for _, p := range policies {
		id := identity(p)
		if first, dup := seen[id]; dup {
			return fmt.Errorf("%s is in %s and %s: a policy may be in a set once", id, first, where)
		}
		seen[id] = where
		if len(a.Policies) == max {
			return fmt.Errorf("more than %d policies", max)
		}
		a.Policies = append(a.Policies, p)
	}
	return nil
}

// policiesIn are the Kyverno policies of one YAML file's documents, and how many documents were
// something else.
func policiesIn(data []byte) (policies []*unstructured.Unstructured, skipped int, _ error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return policies, skipped, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("document %d: %w", i, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, 0, fmt.Errorf("document %d: not a YAML object: %w", i, err)
		}
		if len(obj) == 0 {
			continue // empty, or comments only
		}
		u := &unstructured.Unstructured{Object: obj}
		if !libraryGroup(u.GroupVersionKind().Group) {
			skipped++
			continue
		}
		p, err := member(u)
		if err != nil {
			return nil, 0, fmt.Errorf("document %d: %w", i, err)
		}
		policies = append(policies, p)
	}
}

// libraryGroup says whether a library's documents of group are read as policies: Kyverno's and
// Gatekeeper's templates and Constraints. Others (Gatekeeper's mutations among them: never
// shipped) are left out and counted.
func libraryGroup(group string) bool {
	switch group {
	case "kyverno.io", "policies.kyverno.io", policyhubv1.GatekeeperTemplateGroup, policyhubv1.GatekeeperConstraintGroup:
		return true
	}
	return false
}
