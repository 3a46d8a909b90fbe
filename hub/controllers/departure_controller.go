package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/work"
)

// DepartureReconciler lets go of the clusters that leave the fleet (their cluster-gateway
// credential Secret is deleted): once no declaration lists a departed cluster in its status any
// more (one that could not prune there keeps it, and says so), the hub stops watching it, gives up
// a sync Lease it kept there and drops its metric series. Without it, a fleet whose clusters come
// and go would leave the hub watching clusters it can no longer reach, and /metrics describing
// them, forever.
type DepartureReconciler struct {
	// Reader reads the credential Secrets' metadata and the declarations (the manager's cache).
	Reader          client.Reader
	SecretNamespace string
	// Workers forget a departed cluster: its worker, clients, watch cache and kept Lease.
	Workers *work.Workers
	// Metrics drops its series.
	Metrics *metrics.Sync
	// Recheck is how long after a departure the cluster is let go of once more, for a sync that
	// was already under way when it left (it may have opened a watch, or counted, again). Zero
	// means one minute: longer than a sync request may take.
	Recheck time.Duration

	mu sync.Mutex
	// rechecking are the departed clusters waiting for their recheck.
	rechecking map[string]bool
}

// SetupWithManager registers the reconciler for deletions of credential Secrets.
func (r *DepartureReconciler) SetupWithManager(mgr ctrl.Manager) error {
	departures := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			_, credential := e.Object.GetLabels()[gateway.CredentialTypeLabel]
			return credential && e.Object.GetNamespace() == r.SecretNamespace
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Secret{}, builder.OnlyMetadata, builder.WithPredicates(departures)).
		Named("cluster-departure").
		Complete(r)
}

// Reconcile lets go of a cluster whose credential Secret is gone once no declaration lists it,
// and once more after Recheck.
func (r *DepartureReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Reader.Get(ctx, req.NamespacedName, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	cluster := req.Name
	if err == nil {
		// Back already (a credential Secret of the same name): a member of the fleet again.
		r.takeRecheck(cluster)
		return ctrl.Result{}, nil
	}
	if needed, err := r.stillNeeded(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	} else if needed {
		// A declaration still lists it: pruning there failed and is retried (its status says so),
		// so its sync clients and series still describe something.
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	r.Workers.Forget(cluster)
	r.Metrics.ForgetCluster(cluster)
	if r.takeRecheck(cluster) {
		return ctrl.Result{}, nil
	}
	log.FromContext(ctx).Info("cluster left the fleet: no longer watched, its metrics dropped", "cluster", cluster)
	r.mu.Lock()
	if r.rechecking == nil {
		r.rechecking = map[string]bool{}
	}
	r.rechecking[cluster] = true
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: r.recheck()}, nil
}

func (r *DepartureReconciler) recheck() time.Duration {
	if r.Recheck <= 0 {
		return time.Minute
	}
	return r.Recheck
}

// stillNeeded reports whether a declaration's ClusterStatusSlices still hold the cluster.
func (r *DepartureReconciler) stillNeeded(ctx context.Context, cluster string) (bool, error) {
	slices, err := engine.SlicesOf(ctx, r.Reader, cluster)
	if err != nil {
		return false, fmt.Errorf("list the declarations in cluster %s: %w", cluster, err)
	}
	return len(slices) > 0, nil
}

// takeRecheck reports whether the cluster was waiting for its recheck, which it no longer is.
func (r *DepartureReconciler) takeRecheck(cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	waiting := r.rechecking[cluster]
	delete(r.rechecking, cluster)
	return waiting
}
