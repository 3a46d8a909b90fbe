package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/source"
)

// The source step of a PolicySet: read the source when it is due, keep each new version in a
// snapshot on the hub, record it in status.source, and hand the engine the version kept. A source
// that cannot be read (unreachable, refused, or holding something that is not a valid library)
// changes nothing in the clusters: they keep the last version read, and SourceReady says why.

// ConditionSourceReady and ReasonSourceNotReady: see the API's.
const (
	ConditionSourceReady = policyhubv1.ConditionSourceReady
	ReasonSourceNotReady = policyhubv1.ReasonSourceNotReady
)

// Source timings.
const (
	// defaultSourceInterval is how often an OCI tag is read again.
	defaultSourceInterval = 5 * time.Minute
	// sourceRetryMin and sourceRetryMax bound the backoff after a failed read.
	sourceRetryMin, sourceRetryMax = 5 * time.Second, 5 * time.Minute
	// sourceReadTimeout bounds one read of a source.
	sourceReadTimeout = time.Minute
)

// sourceRoom remembers, per set, when its source was read and the version kept, so that a
// reconcile woken by a summary reads neither the source nor the snapshot.
type sourceRoom struct {
	mu  sync.Mutex
	set map[types.NamespacedName]*sourceState
}

type sourceState struct {
	// generation is the spec the source was last read for; due is when to read it again (zero:
	// only when the spec changes or touch is called).
	generation int64
	due        time.Time
	dirty      bool
	retry      time.Duration
	// kept is the version the set runs, read from its snapshot; stable the last version that
	// completed its rollout, when another (read from its snapshot on first use).
	kept, stable *source.Artifact
}

func (s *sourceRoom) state(key types.NamespacedName) *sourceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[types.NamespacedName]*sourceState{}
	}
	st := s.set[key]
	if st == nil {
		st = &sourceState{}
		s.set[key] = st
	}
	return st
}

// touch marks a set's source due now (its ConfigMaps changed).
func (s *sourceRoom) touch(key types.NamespacedName) {
	st := s.state(key)
	s.mu.Lock()
	st.dirty = true
	s.mu.Unlock()
}

func (s *sourceRoom) forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.set, key)
	s.mu.Unlock()
}

// sourceRead is what the source step hands on: the members of the version kept (nil: none was
// ever read) and when to read the source again.
type sourceRead struct {
	members *source.Artifact
	wake    time.Duration
}

// readSource reads the set's source when due and writes what changed in status.source (one
// status write per new version or new error, never per read).
func (r *PolicySetReconciler) readSource(ctx context.Context, key types.NamespacedName, ps *policyhubv1.PolicySet) (sourceRead, error) {
	st := r.sources.state(key)
	r.sources.mu.Lock()
	now := time.Now()
	// Due: the spec changed (or the hub just started: generation 0), its ConfigMaps or Flux source
	// changed, or its time came (a tag's interval, a failed read's backoff).
	due := st.generation != ps.Generation || st.dirty || (!st.due.IsZero() && !now.Before(st.due))
	kept, nextDue, retry := st.kept, st.due, st.retry
	r.sources.mu.Unlock()
	if !due {
		return sourceRead{members: kept, wake: until(nextDue, now)}, nil
	}

	orig := ps.DeepCopy()
	var refused error
	if kept == nil || (ps.Status.Source != nil && kept.Digest != ps.Status.Source.Digest) {
		// A hub that just started: the version kept is in the snapshot the status names.
		var err error
		if kept, err = r.readSnapshot(ctx, ps); err != nil {
			if !errors.Is(err, source.ErrSnapshotRefused) {
				return sourceRead{}, err
			}
			// A snapshot that is not what the status pins is not run: the source is read
			// again and its version written anew; until then nothing is dispatched (the
			// clusters keep what they run) and SourceReady says why.
			kept, refused = nil, err
		}
	}
	readCtx, cancel := context.WithTimeout(ctx, sourceReadTimeout)
	art, revision, readErr := r.read(readCtx, ps)
	cancel()
	if readErr == nil {
		readErr = r.keep(ctx, ps, kept, art, revision)
	}
	if readErr == nil {
		kept = art
	} else if refused != nil {
		readErr = fmt.Errorf("%w; and the version kept: %w", readErr, refused)
	}

	next := r.nextRead(ps, now, readErr, retry)
	r.sources.mu.Lock()
	st.generation, st.dirty, st.kept, st.due = ps.Generation, false, kept, next.due
	st.retry = next.retry
	r.sources.mu.Unlock()

	r.recordRead(ps, kept, readErr)
	if err := r.patchSourceStatus(ctx, orig, ps); err != nil {
		return sourceRead{}, err
	}
	return sourceRead{members: kept, wake: until(next.due, now)}, nil
}

// followSource is readSource for a replica that does not write the set's status (hub replicas
// share the fleet): it reads no source, and syncs the version the set's writer kept, the
// snapshot status.source names, so that every replica syncs the same version.
func (r *PolicySetReconciler) followSource(ctx context.Context, key types.NamespacedName, ps *policyhubv1.PolicySet) (sourceRead, error) {
	st := r.sources.state(key)
	r.sources.mu.Lock()
	kept := st.kept
	r.sources.mu.Unlock()
	if ps.Status.Source == nil {
		return sourceRead{}, nil
	}
	if kept != nil && kept.Digest == ps.Status.Source.Digest {
		return sourceRead{members: kept}, nil
	}
	kept, err := r.readSnapshot(ctx, ps)
	if err != nil {
		return sourceRead{}, err
	}
	r.sources.mu.Lock()
	// The generation is not taken: were this replica to become the writer, it reads the source.
	st.kept = kept
	r.sources.mu.Unlock()
	return sourceRead{members: kept}, nil
}

// until is how long from now to t (zero t: never).
func until(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), time.Millisecond)
}

type nextRead struct {
	due   time.Time
	retry time.Duration
}

// nextRead says when to read again: after a failure with backoff; an OCI tag every interval; a
// digest, ConfigMaps and inline policies only when they change.
func (r *PolicySetReconciler) nextRead(ps *policyhubv1.PolicySet, now time.Time, readErr error, retry time.Duration) nextRead {
	if readErr != nil {
		retry = min(max(retry*2, sourceRetryMin), sourceRetryMax)
		return nextRead{due: now.Add(retry), retry: retry}
	}
	if oci := ps.Spec.Source.OCI; oci != nil && !pinned(oci.Ref) {
		interval := defaultSourceInterval
		if oci.Interval != nil {
			interval = max(oci.Interval.Duration, 30*time.Second)
		}
		return nextRead{due: now.Add(interval)}
	}
	return nextRead{}
}

// pinned says whether an OCI reference names a digest.
func pinned(ref string) bool {
	_, err := name.NewDigest(ref)
	return err == nil
}

// read reads the set's source, and names its revision. A version whose selected members the
// set may not ship (render.CheckMembers: an exception, a member in the hub's namespace, a member
// that mutates, generates, deletes or verifies images without spec.allow) is refused as a whole,
// as an unreadable one is: the clusters keep the last version kept.
func (r *PolicySetReconciler) read(ctx context.Context, ps *policyhubv1.PolicySet) (*source.Artifact, string, error) {
	art, revision, err := r.sourceReader().Read(ctx, ps.Spec.Source)
	if err != nil {
		return nil, "", err
	}
	members, err := source.Select(art.Policies, ps.Spec.Select)
	if err != nil {
		return nil, "", err
	}
	if err := render.CheckMembers(members, ps.Spec.Allow); err != nil {
		return nil, "", fmt.Errorf("version %s of %s refused: %w", art.Digest, revision, err)
	}
	return art, revision, nil
}

// sourceReader reads sources as this reconciler is set up to.
func (r *PolicySetReconciler) sourceReader() source.Reader {
	return source.Reader{Hub: r.Reader, Secrets: r.APIReader, Namespace: r.Namespace, Limits: r.Limits, Flux: r.Flux, HTTP: r.HTTPClient, FluxSources: r.FluxSources}
}

// keep makes art the set's version: its snapshot written, status.source and status.changes
// recorded (against kept, the version before), older snapshots deleted. The same version again
// changes nothing.
func (r *PolicySetReconciler) keep(ctx context.Context, ps *policyhubv1.PolicySet, kept, art *source.Artifact, revision string) error {
	// What the members selected do beyond validating: spec.select may change with no new version.
	selected, err := source.Select(art.Policies, ps.Spec.Select)
	if err != nil {
		return err
	}
	capabilities := render.MemberCapabilities(selected)
	if kept != nil && kept.Digest == art.Digest && ps.Status.Source != nil && ps.Status.Source.Digest == art.Digest {
		ps.Status.Source.Revision, ps.Status.Source.Capabilities = revision, capabilities
		if ps.Status.Source.MembersDigest == "" { // a status written before the hub pinned members
			members, err := source.MembersDigest(art.Policies)
			if err != nil {
				return err
			}
			ps.Status.Source.MembersDigest = members
		}
		return nil
	}
	members, err := source.MembersDigest(art.Policies)
	if err != nil {
		return err
	}
	snapshot, err := source.NewSnapshot(r.Namespace, ps, art)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(ps, snapshot, r.Client.Scheme()); err != nil {
		return fmt.Errorf("own the snapshot: %w", err)
	}
	if err := r.writeSnapshot(ctx, ps, snapshot, source.Pin{Digest: art.Digest, Members: members}); err != nil {
		return err
	}
	changes := &policyhubv1.VersionChanges{To: art.Digest}
	var before []*unstructured.Unstructured
	if kept != nil {
		changes.From = kept.Digest
		before = kept.Policies
	}
	changes.Added, changes.Changed, changes.Removed, changes.Omitted = source.Changes(before, art.Policies)
	ps.Status.Changes = changes
	ps.Status.Source = &policyhubv1.SourceStatus{
		Revision: revision, Digest: art.Digest, Snapshot: snapshot.Name, MembersDigest: members, ReadAt: &metav1.Time{Time: time.Now()},
		Members: int32(len(art.Policies)), Skipped: int32(art.Skipped),
		Capabilities: capabilities,
	}
	keep := []string{snapshot.Name}
	if ps.Status.Rollout != nil && ps.Status.Rollout.Stable != nil {
		keep = append(keep, ps.Status.Rollout.Stable.Snapshot) // the clusters not reached yet run it
	}
	return r.deleteSnapshots(ctx, ps, keep...)
}

// writeSnapshot creates a version's snapshot. A ConfigMap of its name already there is taken
// only when the set controls it and it holds this version as pinned (the same version read again,
// e.g. by a restarted hub); the set's own holding anything else is replaced; one the set does not
// control is never adopted nor overwritten: the version is not kept, and the error says why.
func (r *PolicySetReconciler) writeSnapshot(ctx context.Context, ps *policyhubv1.PolicySet, snapshot *corev1.ConfigMap, pin source.Pin) error {
	err := r.Client.Create(ctx, snapshot)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("write snapshot %s/%s: %w", snapshot.Namespace, snapshot.Name, err)
	}
	there := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(snapshot), there); err != nil {
		return fmt.Errorf("read snapshot %s/%s: %w", snapshot.Namespace, snapshot.Name, err)
	}
	if !metav1.IsControlledBy(there, ps) {
		return fmt.Errorf("write snapshot %s/%s: a ConfigMap of that name is there and PolicySet %s does not control it (its controller reference): not adopted, not overwritten; the version is not kept until it is deleted",
			there.Namespace, there.Name, ps.Name)
	}
	_, err = source.ReadSnapshot(there, r.Limits, pin)
	if err == nil {
		return nil
	}
	log.FromContext(ctx).Info("replacing a snapshot of the PolicySet that does not hold its version", "snapshot", there.Name, "reason", err.Error())
	if err := r.Client.Delete(ctx, there, client.Preconditions{UID: &there.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace snapshot %s/%s: %w", there.Namespace, there.Name, err)
	}
	if err := r.Client.Create(ctx, snapshot); err != nil {
		return fmt.Errorf("write snapshot %s/%s: %w", snapshot.Namespace, snapshot.Name, err)
	}
	return nil
}

// recordRead sets SourceReady and status.source.lastError from the read's outcome.
func (r *PolicySetReconciler) recordRead(ps *policyhubv1.PolicySet, kept *source.Artifact, readErr error) {
	cond := metav1.Condition{Type: ConditionSourceReady, Status: metav1.ConditionTrue, Reason: "Read", ObservedGeneration: ps.Generation}
	if ps.Status.Source != nil {
		cond.Message = fmt.Sprintf("%d members from %s (%s)", ps.Status.Source.Members, ps.Status.Source.Revision, ps.Status.Source.Digest)
	}
	if readErr != nil {
		msg := policyhubv1.TruncateMessage(readErr.Error(), 1024)
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ReadFailed", msg
		if kept != nil {
			cond.Message = policyhubv1.TruncateMessage(fmt.Sprintf("%s; the clusters keep version %s", readErr, keptVersion(ps, kept)), 1024)
		} else {
			// Nothing was ever read: nothing can be dispatched.
			apimeta.SetStatusCondition(&ps.Status.Conditions, metav1.Condition{
				Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonSourceNotReady, ObservedGeneration: ps.Generation,
				Message: policyhubv1.TruncateMessage("the source could not be read, nothing was dispatched: "+readErr.Error(), 1024),
			})
			ps.Status.ObservedGeneration = ps.Generation
		}
		if ps.Status.Source == nil {
			ps.Status.Source = &policyhubv1.SourceStatus{}
		}
		ps.Status.Source.LastError = msg
		if was := apimeta.FindStatusCondition(ps.Status.Conditions, ConditionSourceReady); was == nil || was.Status != metav1.ConditionFalse {
			r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, "SourceReadFailed", "ReadSource", "%s", cond.Message)
		}
	} else if ps.Status.Source != nil {
		ps.Status.Source.LastError = ""
	}
	apimeta.SetStatusCondition(&ps.Status.Conditions, cond)
}

// keptVersion names the version the clusters keep: its digest, and the revision it was read as.
func keptVersion(ps *policyhubv1.PolicySet, kept *source.Artifact) string {
	if src := ps.Status.Source; src != nil && src.Digest == kept.Digest && src.Revision != "" {
		return kept.Digest + " (" + src.Revision + ")"
	}
	return kept.Digest
}

// sourceHolding says why a set whose clusters hold its version is not Ready all the same: its
// source cannot be read, and the clusters keep the version read last ("" when it can be read,
// or when no version was ever read: recordRead says that).
func sourceHolding(ps *policyhubv1.PolicySet) string {
	c := apimeta.FindStatusCondition(ps.Status.Conditions, ConditionSourceReady)
	if c == nil || c.Status != metav1.ConditionFalse || ps.Status.Source == nil || ps.Status.Source.Digest == "" {
		return ""
	}
	return "the source cannot be read: " + c.Message
}

// patchSourceStatus writes the source step's part of the status when it changed.
func (r *PolicySetReconciler) patchSourceStatus(ctx context.Context, orig, ps *policyhubv1.PolicySet) error {
	if sameSourceStatus(orig, ps) {
		return nil
	}
	if orig.Status.Source == nil || ps.Status.Source == nil || orig.Status.Source.Digest != ps.Status.Source.Digest {
		r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, "NewVersion", "ReadSource", "version %s of %s: %d members", ps.Status.Source.Digest, ps.Status.Source.Revision, ps.Status.Source.Members)
	}
	if err := r.Client.Status().Patch(ctx, ps, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("update status.source: %w", err)
	}
	return nil
}

func sameSourceStatus(a, b *policyhubv1.PolicySet) bool {
	ca, cb := apimeta.FindStatusCondition(a.Status.Conditions, ConditionSourceReady), apimeta.FindStatusCondition(b.Status.Conditions, ConditionSourceReady)
	ra, rb := apimeta.FindStatusCondition(a.Status.Conditions, policyhubv1.ConditionReady), apimeta.FindStatusCondition(b.Status.Conditions, policyhubv1.ConditionReady)
	return equality.Semantic.DeepEqual(a.Status.Source, b.Status.Source) && equality.Semantic.DeepEqual(a.Status.Changes, b.Status.Changes) &&
		sameCondition(ca, cb) && sameCondition(ra, rb)
}

func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}

// stableMembers are the members of the last version that completed the set's rollout, when it
// rolls out and that is not the version kept (nil otherwise, or when its snapshot is gone: the
// clusters of waves not reached yet are then held).
func (r *PolicySetReconciler) stableMembers(ctx context.Context, ps *policyhubv1.PolicySet) (*source.Artifact, error) {
	if ps.Spec.Rollout == nil || ps.Status.Rollout == nil || ps.Status.Rollout.Stable == nil || ps.Status.Rollout.Stable.Snapshot == "" {
		return nil, nil
	}
	name := ps.Status.Rollout.Stable.Snapshot
	key := client.ObjectKeyFromObject(ps)
	st := r.sources.state(key)
	r.sources.mu.Lock()
	stable := st.stable
	r.sources.mu.Unlock()
	if stable != nil && source.SnapshotName(ps.Name, stable.Digest) == name {
		return stable, nil
	}
	stable, err := r.readSnapshotNamed(ctx, ps, name)
	if err != nil || stable == nil {
		return nil, err
	}
	r.sources.mu.Lock()
	st.stable = stable
	r.sources.mu.Unlock()
	return stable, nil
}

// readSnapshot reads the version status.source names from its snapshot (nil: none yet).
func (r *PolicySetReconciler) readSnapshot(ctx context.Context, ps *policyhubv1.PolicySet) (*source.Artifact, error) {
	if ps.Status.Source == nil || ps.Status.Source.Snapshot == "" {
		return nil, nil
	}
	return r.readSnapshotNamed(ctx, ps, ps.Status.Source.Snapshot)
}

// readSnapshotNamed reads a snapshot of the set (nil when it is gone).
func (r *PolicySetReconciler) readSnapshotNamed(ctx context.Context, ps *policyhubv1.PolicySet, name string) (*source.Artifact, error) {
	art, err := r.sourceReader().Snapshot(ctx, ps, name)
	if err == nil && art == nil {
		log.FromContext(ctx).Info("a snapshot of the PolicySet is gone", "snapshot", name)
	}
	return art, err
}

// deleteSnapshots deletes the set's snapshots but those named keep (none: all).
func (r *PolicySetReconciler) deleteSnapshots(ctx context.Context, ps *policyhubv1.PolicySet, keep ...string) error {
	if ps.UID == "" {
		return nil
	}
	list := &corev1.ConfigMapList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(ps.UID)}); err != nil {
		return fmt.Errorf("list the snapshots of PolicySet %s: %w", ps.Name, err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		if slices.Contains(keep, cm.Name) || !metav1.IsControlledBy(cm, ps) {
			continue
		}
		if err := r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete snapshot %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}
