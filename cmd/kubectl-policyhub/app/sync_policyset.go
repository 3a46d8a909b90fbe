package app

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/source"
)

// setDeclarations are the PolicySets to plan (pick says which), placed and rendered with the
// hub's own code; the ones the hub would not sync become notes.
func (so *syncOptions) setDeclarations(ctx context.Context, hub client.Client, inv placement.Inventory, pick func(string) bool, note func(source, format string, args ...any)) ([]syncDeclaration, error) {
	var decls []syncDeclaration
	sets := &policyhubv1.PolicySetList{}
	if err := hub.List(ctx, sets); err != nil && !meta.IsNoMatchError(err) && !isMissingCRD(err) {
		return nil, fmt.Errorf("list PolicySets: %w", err)
	}
	for i := range sets.Items {
		ps := &sets.Items[i]
		if !pick("pset/" + ps.Name) {
			continue
		}
		declared := render.PolicySetOwner(so.hubID, ps.Name).Source()
		clusters, err := clusterStates(ctx, hub, ps, policyhubv1.KindPolicySet)
		if err != nil {
			return nil, err
		}
		d, ok, err := syncDeclarationOf(declared, ps.DeletionTimestamp != nil, ps.Spec.Suspend, ps.Spec.Prune, clusters, note,
			func() (*render.Targets, error) {
				current, stable, err := so.setVersions(ctx, hub, ps, func(format string, args ...any) { note(declared, format, args...) })
				if err != nil {
					return nil, err
				}
				t, _, _, err := declare.PolicySetTargets(so.hubID, ps, current, stable, inv)
				if err != nil {
					return nil, err
				}
				// As the hub does: its namespaced CEL members marked with the exceptions in force.
				return t, declare.MarkExceptionsInForce(ctx, hub, policyhubv1.KindPolicySet, ps.Name, declare.MemberExceptedRef, t)
			})
		if err != nil {
			return nil, err
		}
		if ok {
			decls = append(decls, d)
		}
	}
	return decls, nil
}

// setVersions are the versions of a PolicySet a dry-run plans: current is what its source holds
// now, read as the hub reads it (so a version the hub has not read yet is previewed before it is
// applied), or the version the hub keeps when the source cannot be read from here; stable is the
// last version that completed its rollout, when it rolls out.
//
// A Flux source is never fetched from here: its artifact URL is whatever the Flux object's status
// says, which its namespace's editors may point anywhere, and the hub fetches it only within its
// fence (--flux-source-namespaces, --flux-artifact-host), which this machine neither knows nor
// shares (nor, usually, reaches the in-cluster storage). Its version is the one the hub read
// within that fence and keeps in its snapshot, hashed again here against the set's status.
func (so *syncOptions) setVersions(ctx context.Context, hub client.Client, ps *policyhubv1.PolicySet, note func(format string, args ...any)) (current, stable *source.Artifact, err error) {
	// No Flux fence and no HTTP client: this reader fetches no Flux artifact.
	reader := source.Reader{
		Hub: hub, Secrets: hub, Namespace: so.hubNamespace, Limits: source.DefaultLimits, FluxSources: fluxSourcesServed(hub),
	}
	kept := ps.Status.Source
	var art *source.Artifact
	var revision string
	var readErr error
	if ps.Spec.Source.FluxSource != nil {
		readErr = errors.New("a Flux source's artifact is read by the hub only, within its fence")
	} else {
		art, revision, readErr = reader.Read(ctx, ps.Spec.Source)
	}
	switch {
	case readErr == nil && (kept == nil || kept.Digest != art.Digest):
		was := "none yet"
		if kept != nil && kept.Digest != "" {
			was = kept.Digest
		}
		note("its source holds a new version, planned here: %s of %s, %d members (the hub runs %s)", art.Digest, revision, len(art.Policies), was)
		current = art
	case readErr == nil:
		current = art
	case kept == nil || kept.Snapshot == "":
		return nil, nil, fmt.Errorf("read its source: %w (and the hub keeps no version of it yet)", readErr)
	default:
		if current, err = reader.Snapshot(ctx, ps, kept.Snapshot); err != nil || current == nil {
			return nil, nil, fmt.Errorf("read its source: %v; and the version the hub keeps (snapshot %s): %v", readErr, kept.Snapshot, err)
		}
		note("its source could not be read from here (%v): planned the version the hub keeps, %s", readErr, kept.Digest)
	}
	if ps.Spec.Rollout != nil && ps.Status.Rollout != nil && ps.Status.Rollout.Stable != nil && ps.Status.Rollout.Stable.Snapshot != "" {
		if stable, err = reader.Snapshot(ctx, ps, ps.Status.Rollout.Stable.Snapshot); err != nil {
			return nil, nil, err
		}
	}
	return current, stable, nil
}

// fluxSourcesServed are the Flux source kinds the hub serves.
func fluxSourcesServed(hub client.Client) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, kind := range []string{"GitRepository", "OCIRepository", "Bucket"} {
		gvk := policyhubv1.FluxSourceGroupVersion.WithKind(kind)
		if _, err := hub.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil || !meta.IsNoMatchError(err) {
			out = append(out, gvk)
		}
	}
	return out
}
