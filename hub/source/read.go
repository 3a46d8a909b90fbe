package source

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Reader reads a PolicySet's source with what it needs of the hub; the hub's PolicySet
// controller and `kubectl policyhub sync --dry-run` read sources through it alike.
type Reader struct {
	// Hub reads the policy library ConfigMaps and the Flux sources; Secrets the registry Secrets
	// and the snapshots (the hub's controller reads those uncached).
	Hub, Secrets client.Reader
	// Namespace is the hub's: the libraries and registry Secrets are there.
	Namespace string
	// Limits bound what a source may bring in.
	Limits Limits
	// Flux fences the Flux sources read: their namespaces and the server of their artifacts.
	// The zero fence reads none.
	Flux FluxFence
	// HTTP downloads Flux artifacts: Flux.Client(), which dials nothing but the fence's storage
	// (nil: none are read).
	HTTP *http.Client
	// FluxSources are the Flux source kinds the hub serves; no other is read.
	FluxSources []schema.GroupVersionKind
}

// Read reads a PolicySet's source, and names its revision: the OCI reference, the Flux
// artifact's revision, "configmaps" or "inline".
func (r Reader) Read(ctx context.Context, src policyhubv1.PolicySetSource) (*Artifact, string, error) {
	switch {
	case src.OCI != nil:
		keychain, err := r.keychain(ctx, src.OCI.SecretRef)
		if err != nil {
			return nil, "", err
		}
		var opts []name.Option
		if src.OCI.Insecure {
			opts = append(opts, name.Insecure)
		}
		art, err := PullOCI(ctx, src.OCI.Ref, keychain, r.Limits, opts...)
		return art, src.OCI.Ref, err
	case src.FluxSource != nil:
		return r.readFlux(ctx, src.FluxSource)
	case src.ConfigMaps != nil:
		sel := labels.Everything()
		if src.ConfigMaps.Selector != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(src.ConfigMaps.Selector); err != nil {
				return nil, "", fmt.Errorf("spec.source.configMaps.selector: %w", err)
			}
		}
		list := &corev1.ConfigMapList{}
		if err := r.Hub.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, "", fmt.Errorf("list the policy library ConfigMaps: %w", err)
		}
		var libraries []corev1.ConfigMap
		for _, cm := range list.Items {
			if _, ok := cm.Labels[policyhubv1.LabelPolicyLibrary]; ok {
				libraries = append(libraries, cm)
			}
		}
		art, err := ConfigMaps(libraries, r.Limits)
		return art, "configmaps", err
	default:
		art, err := Inline(src.Inline, r.Limits)
		return art, "inline", err
	}
}

// readFlux reads the policies under the path of a Flux source's artifact, as Flux's own
// controllers read an artifact: its status.artifact's url, downloaded and verified against its
// digest. Its revision (e.g. main@sha1:…) names the version. Only within the fence: a source in
// another namespace is not read at all, and a URL to anywhere but source-controller's storage is
// not fetched.
func (r Reader) readFlux(ctx context.Context, ref *policyhubv1.FluxSourceReference) (*Artifact, string, error) {
	gvk := policyhubv1.FluxSourceGroupVersion.WithKind(ref.Kind)
	if !slices.Contains(r.FluxSources, gvk) {
		return nil, "", fmt.Errorf("spec.source.fluxSource: the hub does not serve %s (install Flux's source-controller, then restart the hub)", gvk)
	}
	if err := r.Flux.CheckNamespace(ref.Namespace); err != nil {
		return nil, "", err
	}
	if r.HTTP == nil {
		return nil, "", fmt.Errorf("spec.source.fluxSource: %w", ErrNoArtifactClient)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := r.Hub.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		return nil, "", fmt.Errorf("spec.source.fluxSource: read %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	field := func(name string) string {
		v, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", name)
		return v
	}
	url, digest, revision := field("url"), field("digest"), field("revision")
	if url == "" || digest == "" {
		why := ""
		if conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions"); len(conds) > 0 {
			for _, c := range conds {
				if cond, ok := c.(map[string]any); ok && cond["type"] == "Ready" {
					why = fmt.Sprintf(" (Ready %v: %v)", cond["status"], cond["message"])
				}
			}
		}
		return nil, "", fmt.Errorf("%s %s/%s has no artifact yet%s", ref.Kind, ref.Namespace, ref.Name, why)
	}
	if err := r.Flux.CheckURL(url); err != nil {
		return nil, "", fmt.Errorf("%s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	art, err := FetchArchive(ctx, r.HTTP, url, digest, ref.Path, r.Limits)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s/%s revision %s: %w", ref.Kind, ref.Namespace, ref.Name, revision, err)
	}
	return art, revision, nil
}

// keychain reads the registry credentials of a docker-registry Secret in the hub's namespace.
func (r Reader) keychain(ctx context.Context, ref *policyhubv1.LocalSecretReference) (authn.Keychain, error) {
	if ref == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("spec.source.oci.secretRef: read Secret %s/%s: %w", r.Namespace, ref.Name, err)
	}
	keychain, err := RegistryKeychain(ctx, secret)
	if err != nil {
		return nil, fmt.Errorf("spec.source.oci.secretRef: Secret %s/%s: %w", r.Namespace, ref.Name, err)
	}
	return keychain, nil
}

// Snapshot reads the set's snapshot of that name from the hub's namespace (nil when it is gone):
// the version status.source or status.rollout.stable names, re-hashed against what the status
// pins (see Pin). One the set does not control, or that is not what the status pins, is an error
// wrapping ErrSnapshotRefused.
func (r Reader) Snapshot(ctx context.Context, ps *policyhubv1.PolicySet, name string) (*Artifact, error) {
	var pin Pin
	switch {
	case ps.Status.Source != nil && ps.Status.Source.Snapshot == name:
		pin = Pin{Digest: ps.Status.Source.Digest, Members: ps.Status.Source.MembersDigest}
	case ps.Status.Rollout != nil && ps.Status.Rollout.Stable != nil && ps.Status.Rollout.Stable.Snapshot == name:
		pin = Pin{Revision: ps.Status.Rollout.Stable.Revision, Members: ps.Status.Rollout.Stable.MembersDigest}
	default:
		return nil, fmt.Errorf("snapshot %s/%s: the status of PolicySet %s names no such version: %w", r.Namespace, name, ps.Name, ErrSnapshotRefused)
	}
	cm := &corev1.ConfigMap{}
	err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s/%s: %w", r.Namespace, name, err)
	}
	if !metav1.IsControlledBy(cm, ps) {
		return nil, fmt.Errorf("snapshot %s/%s is not PolicySet %s's (its controller reference): not read: %w", r.Namespace, cm.Name, ps.Name, ErrSnapshotRefused)
	}
	return ReadSnapshot(cm, r.Limits, pin)
}
