package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// floor is the least a hub that keeps its declarations as objects can spend: the ceiling's
// writes to the clusters and, at the same time, what the issue asks of each declaration on the
// hub (the FleetPolicy created, its status written once, one Event), with nothing deciding
// anything in between: no controller, no watch, no reads. It syncs nothing a user could rely
// on; it measures how close to the ceiling any controller with status and Events can get here.
// With watched, every cluster also keeps a watch cache of the written kind open, as a hub that
// restores drift within seconds must: the least such a hub can spend.
func (b *bench) floor(watched bool) func(ctx context.Context, prefix string) (cost, cost, error) {
	return func(ctx context.Context, prefix string) (cost, cost, error) { return b.floorRun(ctx, prefix, watched) }
}

func (b *bench) floorRun(ctx context.Context, prefix string, watched bool) (cost, cost, error) {
	clusterPass, stop, err := b.ssaPass(ctx, prefix, renderedPolicy, watched)
	defer stop()
	if err != nil {
		return cost{}, cost{}, err
	}
	hubCfg := rest.CopyConfig(b.f.Hub.Config)
	hubCfg.QPS, hubCfg.Burst = -1, 0
	scheme := runtime.NewScheme()
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	hub, err := client.New(hubCfg, client.Options{Scheme: scheme})
	if err != nil {
		return cost{}, cost{}, err
	}
	clientset, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return cost{}, cost{}, err
	}
	// The Events go out as policyhub's do: through client-go's events broadcaster.
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return cost{}, cost{}, err
	}
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, "policyhub-hub")

	names := make([]string, b.o.policies)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	declare := func(i int) error {
		fp, err := fleetPolicy(names[i], i)
		if err != nil {
			return err
		}
		if err := hub.Create(ctx, fp); err != nil {
			return err
		}
		orig := fp.DeepCopy()
		status, clusters := syncedStatus(b.clusterNames(), fp.Generation, metav1.Now())
		fp.Status = status
		if err := hub.Status().Patch(ctx, fp, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("status of %s: %w", fp.Name, err)
		}
		// The clusters' state, in the declaration's one ClusterStatusSlice (a few clusters).
		slice := &policyhubv1.ClusterStatusSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.f.SecretNamespace, Name: policyhubv1.ClusterStatusSliceName(policyhubv1.KindFleetPolicy, string(fp.UID), 0),
				Labels: map[string]string{policyhubv1.LabelDeclarationUID: string(fp.UID)}},
			Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: fp.Name, UID: string(fp.UID)},
			Clusters:    clusters,
		}
		if err := hub.Create(ctx, slice); err != nil {
			return fmt.Errorf("ClusterStatusSlice of %s: %w", fp.Name, err)
		}
		recorder.Eventf(fp, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", syncedNote(clusters))
		return nil
	}

	apply, err := b.measure(prefix, func() error {
		// Both sides at once: the ceiling's loop in the clusters, the declarations on the hub.
		clusters := make(chan error, 1)
		go func() { clusters <- clusterPass() }()
		return errors.Join(inParallel(b.o.parallel, len(names), declare), <-clusters)
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	// Nothing changed: a resync needs no hub write, so the no-op resync is the ceiling's.
	noop, err := b.measure(prefix, clusterPass)
	if err != nil {
		return cost{}, cost{}, err
	}
	// Leave the hub as the round found it. No controller runs to honour policyhub's finalizer
	// (set at admission), so it is taken off first; the clusters' objects stay, as the ceiling's.
	for _, name := range names {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := hub.Patch(ctx, fp, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			return cost{}, cost{}, err
		}
		if err := hub.Delete(ctx, fp); err != nil && !apierrors.IsNotFound(err) {
			return cost{}, cost{}, err
		}
	}
	if err := hub.DeleteAllOf(ctx, &policyhubv1.ClusterStatusSlice{}, client.InNamespace(b.f.SecretNamespace), client.HasLabels{policyhubv1.LabelDeclarationUID}); err != nil {
		return cost{}, cost{}, err
	}
	return apply, noop, nil
}

// syncedStatus is the status policyhub writes for a FleetPolicy just synced everywhere.
func syncedStatus(names []string, generation int64, now metav1.Time) (policyhubv1.FleetPolicyStatus, []policyhubv1.ClusterStatus) {
	s := policyhubv1.FleetPolicyStatus{ObservedGeneration: generation}
	var clusters []policyhubv1.ClusterStatus
	for _, name := range names {
		clusters = append(clusters, policyhubv1.ClusterStatus{
			Name: name, Phase: policyhubv1.ClusterPhaseSynced, LastSyncTime: &now,
			Message: "created 1, updated 0, deleted 0, unchanged 0", Actions: policyhubv1.ActionCounts{Created: 1},
		})
	}
	s.Summary = policyhubv1.StatusSummary{Clusters: int32(len(names)), Synced: int32(len(names))}
	s.Conditions = []metav1.Condition{{
		Type: policyhubv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", ObservedGeneration: generation,
		Message: fmt.Sprintf("synced in %d clusters", len(names)), LastTransitionTime: now,
	}}
	return s, clusters
}

// syncedNote is the note of policyhub's Synced Event for these clusters.
func syncedNote(clusters []policyhubv1.ClusterStatus) string {
	var parts []string
	for _, c := range clusters {
		parts = append(parts, fmt.Sprintf("%s (%s)", c.Name, c.Message))
	}
	return strings.Join(parts, "; ")
}

func (b *bench) clusterNames() []string {
	var names []string
	for _, c := range b.f.Managed {
		names = append(names, c.Name)
	}
	return names
}
