package source

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What `kyverno oci push` writes (Kyverno 1.9 to 1.19, cmd/cli/kubectl-kyverno/commands/oci): an
// OCI manifest whose config has KyvernoConfigMediaType, and one uncompressed layer per policy
// (ClusterPolicy or Policy, as YAML) of KyvernoPolicyLayerMediaType. `kyverno oci pull` reads
// the layers of that type and nothing else; so does PullOCI.
const (
	KyvernoConfigMediaType      = "application/vnd.cncf.kyverno.config.v1+json"
	KyvernoPolicyLayerMediaType = "application/vnd.cncf.kyverno.policy.layer.v1+yaml"
)

// Limits bound what one artifact may bring in; the sizes are checked on the manifest, before a
// byte of a layer is read.
type Limits struct {
	// MaxPolicies is the most policies an artifact may hold.
	MaxPolicies int
	// MaxPolicyBytes bounds one policy's layer, MaxTotalBytes all of them.
	MaxPolicyBytes, MaxTotalBytes int64
}

// DefaultLimits hold the largest libraries in use (Kyverno's policy library: ~300 policies of a
// few KiB) with room, and keep one artifact well inside the hub's memory.
var DefaultLimits = Limits{MaxPolicies: 500, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 16 << 20}

// Artifact is a set of policies read from a source.
type Artifact struct {
	// Digest pins what was read ("sha256:…"): an OCI artifact's manifest digest (a tag moved later
	// names another), or a Flux artifact's digest as verified.
	Digest string
	// Policies, sorted by kind, namespace and name, each reduced to what a policy is (see strip).
	Policies []*unstructured.Unstructured
	// Skipped counts the documents read that are not Kyverno policies (a kustomization.yaml, other
	// manifests in a Git folder): left out, not an error.
	Skipped int
}

// policyKinds are the kinds a Kyverno artifact may hold, by apiVersion: what `kyverno oci push`
// writes (it converts kyverno.io/v2beta1 into v1 types and keeps the apiVersion).
var policyKinds = map[string][]string{
	"kyverno.io/v1":      {"ClusterPolicy", "Policy"},
	"kyverno.io/v2beta1": {"ClusterPolicy", "Policy"},
}

// PullOCI reads the Kyverno policy artifact at ref, a tag ("registry/repo:tag") or a digest
// ("registry/repo@sha256:…"), with the credentials keychain holds for its registry (nil:
// anonymous). An index, another kind of artifact, a layer that is not one Kyverno policy, a
// policy listed twice or anything over limits is an error that names it; nothing is returned
// then. nameOpts say how to read ref (name.Insecure: over plain HTTP).
func PullOCI(ctx context.Context, ref string, keychain authn.Keychain, limits Limits, nameOpts ...name.Option) (*Artifact, error) {
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("OCI reference %q: %w", ref, err)
	}
	if keychain == nil {
		keychain = authn.NewMultiKeychain()
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)}
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s is an image index (%s): want one artifact, as kyverno oci push writes", ref, desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("read the manifest of %s: %w", ref, err)
	}
	switch mt := string(manifest.Config.MediaType); mt {
	case KyvernoConfigMediaType:
	case KyvernoBundleConfigMediaType:
		art, err := readBundle(ctx, ref, img, manifest, limits)
		if err != nil {
			return nil, err
		}
		art.Digest = desc.Digest.String()
		return art, nil
	default:
		return nil, fmt.Errorf("%s: config media type %q: not a Kyverno policy artifact (want %s, as kyverno oci push writes, or a policy bundle, %s)", ref, mt, KyvernoConfigMediaType, KyvernoBundleConfigMediaType)
	}
	layers, err := policyLayers(ref, manifest, limits)
	if err != nil {
		return nil, err
	}
	art := &Artifact{Digest: desc.Digest.String()}
	seen := map[string]string{}
	for _, l := range layers {
		policy, err := readPolicy(img, l, limits)
		if err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", ref, l.Digest, err)
		}
		id := identity(policy)
		if first, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s: %s is in layers %s and %s: a policy may be in an artifact once", ref, id, first, l.Digest)
		}
		seen[id] = l.Digest.String()
		art.Policies = append(art.Policies, policy)
	}
	slices.SortFunc(art.Policies, func(a, b *unstructured.Unstructured) int { return strings.Compare(identity(a), identity(b)) })
	return art, nil
}

// policyLayers are the manifest's policy layers, within limits by their declared sizes.
func policyLayers(ref string, manifest *v1.Manifest, limits Limits) ([]v1.Descriptor, error) {
	var layers []v1.Descriptor
	var total int64
	for _, l := range manifest.Layers {
		if string(l.MediaType) != KyvernoPolicyLayerMediaType {
			continue // not a policy: kyverno oci pull skips it too
		}
		if len(layers) == limits.MaxPolicies {
			return nil, fmt.Errorf("%s holds more than %d policies", ref, limits.MaxPolicies)
		}
		if l.Size > limits.MaxPolicyBytes {
			return nil, fmt.Errorf("%s: layer %s is %d bytes, over the %d a policy may have", ref, l.Digest, l.Size, limits.MaxPolicyBytes)
		}
		if total += l.Size; total > limits.MaxTotalBytes {
			return nil, fmt.Errorf("%s: its policies are over %d bytes", ref, limits.MaxTotalBytes)
		}
		layers = append(layers, l)
	}
	return layers, nil
}

// readPolicy reads one policy layer (its digest verified by the registry client as it is read,
// its size bounded again here, whatever the manifest said).
func readPolicy(img v1.Image, l v1.Descriptor, limits Limits) (*unstructured.Unstructured, error) {
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Compressed() // kyverno oci push writes uncompressed layers: the bytes are the YAML
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limits.MaxPolicyBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limits.MaxPolicyBytes {
		return nil, fmt.Errorf("over the %d bytes a policy may have", limits.MaxPolicyBytes)
	}
	return parsePolicy(data)
}

// parsePolicy reads one Kyverno policy of the kinds `kyverno oci push` writes from YAML and
// strips it to what a policy is.
func parsePolicy(data []byte) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("not one YAML object: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	if !slices.Contains(policyKinds[apiVersion], kind) {
		return nil, fmt.Errorf("kind %q of apiVersion %q: not a Kyverno policy (ClusterPolicy or Policy of kyverno.io/v1 or v2beta1)", kind, apiVersion)
	}
	return member(u)
}

// member is a policy of a library stripped to what a policy is, if it has a Kyverno policy's
// shape (policyhubv1.CheckPolicyShape: these never passed admission) with a name and a namespace
// only where its kind has one. Whether a set may ship it (no exception, nothing beyond
// validating unless its spec.allow says so) is judged on the members the set selects.
func member(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	kind := u.GetKind()
	policy := strip(u)
	if err := policyhubv1.CheckPolicyShape(policy.Object); err != nil {
		return nil, fmt.Errorf("%s %q: %w", kind, policy.GetName(), err)
	}
	if policy.GetName() == "" {
		return nil, fmt.Errorf("%s: metadata.name is required", kind)
	}
	ns := policy.GetNamespace()
	if kind == "ClusterPolicy" && ns != "" {
		return nil, fmt.Errorf("%s %s: metadata.namespace %q: a ClusterPolicy has none", kind, policy.GetName(), ns)
	}
	if ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%s %s: metadata.namespace %q: %s", kind, policy.GetName(), ns, strings.Join(errs, "; "))
		}
	}
	return policy, nil
}

// strip keeps of a policy what the hub ships: apiVersion, kind, name, namespace, labels,
// annotations and spec. `kyverno oci push` marshals typed policies, so its layers carry a status
// and a null creationTimestamp; anything else a layer holds is not the author's to set either.
func strip(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	if l := u.GetLabels(); len(l) > 0 {
		out.SetLabels(l)
	}
	if a := u.GetAnnotations(); len(a) > 0 {
		out.SetAnnotations(a)
	}
	if spec, ok := u.Object["spec"]; ok {
		out.Object["spec"] = spec
	}
	return out
}

// identity names a policy within an artifact: kind, namespace and name.
func identity(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}
