package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/hub/work"
)

// The names e2e tests and commands know the hub's conditions and finalizer by, now the engine's.
const (
	// Finalizer keeps a declaration until its policies are pruned from every cluster.
	Finalizer = engine.Finalizer
	// ReasonOverBudget: see engine.ReasonOverBudget.
	ReasonOverBudget = engine.ReasonOverBudget
)

// HubOptions are the settings of a whole hub: every controller policyhub-hub runs.
type HubOptions struct {
	// Gateway reaches cluster-gateway: the hub's config (aggregation layer) or the gateway's URL.
	Gateway         *rest.Config
	SecretNamespace string
	HubID           string
	// Lock configures the clusters' sync Lease; Lock.Identity (this process's identity in the
	// Leases) is required.
	Lock work.LockOptions
	// Registry receives the hub's metrics.
	Registry prometheus.Registerer
	// Resync makes every cluster's worker sync everything again after it (a backstop: drift
	// the watch sees is corrected at once).
	Resync time.Duration
	// RetryMaxDelay caps the backoff of a cluster that is unreachable or failing; zero means 1m.
	RetryMaxDelay time.Duration
	// ProbeTimeout is how long a cluster has to answer before it counts as unreachable; zero
	// means 5s.
	ProbeTimeout time.Duration
	// MaxOwnedObjects bounds the objects labelled as this hub's one cluster's cache may hold
	// (past it the cluster is read directly); zero means work.DefaultMaxOwnedObjects.
	MaxOwnedObjects int
	// TenantBudget bounds the objects one tenant's declarations may hold in one cluster (its
	// newest past it are refused there); zero means work.DefaultTenantBudget.
	TenantBudget int
	// MaxConcurrentPasses bounds the cluster passes planning and writing at once; zero means 32.
	MaxConcurrentPasses int
	// MaxConcurrentReconciles bounds the declarations of each kind reconciled at once.
	MaxConcurrentReconciles int
	// Namespace is the hub's own (required): it publishes its id there for the CLI (a ConfigMap
	// policyhub-hub-info), and keeps FleetPolicies' ClusterStatusSlices there.
	Namespace string
	// ClustersPerSlice is how many clusters one ClusterStatusSlice holds; zero means
	// policyhubv1.MaxClustersPerSlice.
	ClustersPerSlice int
	// StatusCoalesce: see DeclarationOptions; zero means 2s.
	StatusCoalesce time.Duration
	// ApplicationStatusInterval and DepartureRecheck: see ApplicationPolicyReconciler and
	// DepartureReconciler; zero means their defaults.
	ApplicationStatusInterval, DepartureRecheck time.Duration
	// MaxExceptionLifetime bounds a FleetPolicyException's lifetime; zero means
	// policyhubv1.DefaultMaxExceptionLifetime.
	MaxExceptionLifetime time.Duration
	// ApprovableServiceAccounts are the ServiceAccounts (user names
	// system:serviceaccount:NAMESPACE:NAME) whose exception requests may be approved; any other
	// ServiceAccount's never may.
	ApprovableServiceAccounts []string
	// Flux fences the Flux sources PolicySets may read (namespaces, artifact server); nil means
	// the defaults: sources in the hub's namespace and flux-system, artifacts from
	// source.DefaultFluxStorage.
	Flux *source.FluxFence
	// Pacing, when set, makes the hub publish each agent's pacing in its summary's status (see
	// Pacer). Nil: it publishes none, and removes any a summary's status holds, so agents keep
	// their own flags and are judged by the heartbeat they say (policyhub-hub always sets it;
	// tests of sub-minute heartbeats leave it out).
	Pacing *PacingOptions
	// Replica, when set, makes this process one of the hub's replicas that share the fleet,
	// active-active: it holds a Lease of its own, works the clusters assigned to it and writes
	// the status of its share of the declarations (see hub/engine's share.go). Nil: it works every cluster.
	Replica *shard.Replica
}

// SetupHub registers every controller of the hub with mgr — FleetPolicy, PolicySet, ApplicationPolicy (and
// the KubeVela adapter where the hub serves KubeVela's Application), cluster departures,
// PolicyReportSummary — over one set of per-cluster workers, which it returns: Close them on
// shutdown so the sync Leases still held are given up.
func SetupHub(ctx context.Context, mgr ctrl.Manager, o HubOptions) (*work.Workers, error) {
	if o.Namespace == "" {
		return nil, errors.New("the hub's namespace is required: FleetPolicies' ClusterStatusSlices live there")
	}
	if err := engine.IndexSlices(ctx, mgr); err != nil {
		return nil, fmt.Errorf("index ClusterStatusSlices by cluster: %w", err)
	}
	syncMetrics := metrics.NewSync(o.Registry)
	results := &engine.ResultEvents{}
	sharder, err := newSharder(ctx, mgr, o)
	if err != nil {
		return nil, err
	}
	var works func(string) bool
	var summaryMetas cache.Cache
	lock := o.Lock
	if sharder != nil {
		works = sharder.Works
		// A cluster inherited from a replica that died mid-pass is taken as soon as membership
		// judges it dead, not a full Lease duration after this replica first saw its sync Lease.
		lock.HolderDead = sharder.Dead
		if summaryMetas, err = NewSummaryMetas(mgr); err != nil {
			return nil, err
		}
	}
	// The clusters' engine facts, from their summaries: the workers phase by them (a Kyverno
	// that no longer enforces legacy kinds), and a change hands the cluster a pass.
	engines := NewEngineFacts()
	workers, err := work.NewWorkers(work.WorkersOptions{
		ClusterConfig: func(cluster string) (*rest.Config, error) { return gateway.ClusterConfig(o.Gateway, cluster) },
		Works:         works,
		TenantBudget:  o.TenantBudget,
		Sync: work.Options{HubID: o.HubID, Lock: lock, ProbeTimeout: o.ProbeTimeout, MaxOwnedObjects: o.MaxOwnedObjects,
			KyvernoVersion: engines.KyvernoVersion},
		Window:              10 * time.Millisecond,
		Resync:              o.Resync,
		RetryMax:            o.RetryMaxDelay,
		MaxConcurrentPasses: o.MaxConcurrentPasses,
		Observe:             func(r *work.ClusterResult) { syncMetrics.Observe(syncPass(r)) },
		Published:           results.Published,
	})
	if err != nil {
		return nil, err
	}
	engines.Changed = workers.EngineChanged
	metrics.NewPhases(o.Registry, func() []metrics.ClusterPhases { return clusterPhases(workers.Phases()) })
	ocm, err := OCMPlacementsServed(mgr)
	if err != nil {
		workers.Close()
		return nil, fmt.Errorf("discover OCM on the hub: %w", err)
	}
	// One record of the agents' Lease renewals: the summary controller fills it from its watch;
	// rollouts and metrics read it.
	heard := heartbeat.New(time.Now)
	declarations := engine.DeclarationOptions{
		Client: mgr.GetClient(), Reader: mgr.GetClient(), SecretNamespace: o.SecretNamespace,
		HubID: o.HubID, Workers: workers, Results: results, Recorder: mgr.GetEventRecorder("policyhub-hub"),
		StatusCoalesce: o.StatusCoalesce, MaxConcurrentReconciles: o.MaxConcurrentReconciles, OCMPlacements: ocm, Heard: heard,
		Namespace: o.Namespace, ClustersPerSlice: o.ClustersPerSlice, Renders: metrics.NewRenders(o.Registry), Shard: sharder,
	}
	if summaryMetas != nil {
		declarations.SummaryMetas = summaryMetas
	}
	setup := func() error {
		kinds, err := declarationKinds(mgr, o, declarations)
		if err != nil {
			return err
		}
		if err := kinds.Setup(mgr); err != nil {
			return err
		}
		departures := &DepartureReconciler{Reader: mgr.GetClient(), SecretNamespace: o.SecretNamespace, Workers: workers, Metrics: syncMetrics, Recheck: o.DepartureRecheck}
		if err := departures.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("cluster departure controller: %w", err)
		}
		if err := mgr.Add(hubInfo{client: mgr.GetClient(), namespace: o.Namespace, hubID: o.HubID}); err != nil {
			return fmt.Errorf("publish the hub's id: %w", err)
		}
		var pacer *Pacer
		if o.Pacing != nil {
			// The fleet's size is counted from the credential Secrets' cache, which holds the
			// whole fleet even on a replica working a share of it.
			pacer = NewPacer(mgr.GetClient(), o.SecretNamespace, o.Pacing.SummaryBudget, o.Pacing.RenewalBudget,
				func(keys ...types.NamespacedName) { results.Wake(kindSummary, keys...) })
			if err := pacer.Watch(ctx, mgr.GetCache()); err != nil {
				return err
			}
			if err := mgr.Add(pacer); err != nil {
				return fmt.Errorf("publish the agents' pacing: %w", err)
			}
		}
		summaries := &SummaryReconciler{
			Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("policyhub-hub"), Heard: heard,
			Compliance: metrics.NewCompliance(o.Registry, time.Now, heard.At), MaxConcurrentReconciles: o.MaxConcurrentReconciles,
			Works: works, Wake: results.For(kindSummary), Engines: engines, Pacer: pacer,
		}
		if err := summaries.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("PolicyReportSummary controller: %w", err)
		}
		if sharder != nil {
			labeler := &SummaryLabeler{Client: mgr.GetClient(), Metas: summaryMetas, Replica: sharder.Name(), Works: sharder.Works, Wake: results.For(kindSummaryLabel)}
			if err := labeler.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("PolicyReportSummary labeller: %w", err)
			}
			h := &handover{kinds: kinds, reader: mgr.GetClient(), summaryMetas: summaryMetas, workers: workers, results: results, shard: sharder, metrics: metrics.NewReplica(o.Registry), sync: syncMetrics}
			sharder.OnChange(func(a shard.Assignment) { h.moved(ctx, a) })
			if err := mgr.Add(sharder); err != nil {
				return fmt.Errorf("share the fleet with the other replicas: %w", err)
			}
		}
		return nil
	}
	if err := setup(); err != nil {
		workers.Close()
		return nil, err
	}
	return workers, nil
}

// declarationKinds are the declaration kinds the hub runs, each with its reconciler over the
// shared declarations' options: the hub's one list of them (a new kind is one more line here).
func declarationKinds(mgr ctrl.Manager, o HubOptions, declarations engine.DeclarationOptions) (engine.Registry, error) {
	rollouts := metrics.NewRollout(o.Registry)
	flux, err := FluxSourcesServed(mgr)
	if err != nil {
		return nil, fmt.Errorf("discover Flux's sources on the hub: %w", err)
	}
	fence, err := fluxFence(o)
	if err != nil {
		return nil, err
	}
	kubeVela, err := ApplicationServed(mgr)
	if err != nil {
		return nil, fmt.Errorf("discover KubeVela on the hub: %w", err)
	}
	bindings, err := ClusterSetBindingsServed(mgr)
	if err != nil {
		return nil, fmt.Errorf("discover OCM's cluster set bindings on the hub: %w", err)
	}
	return engine.NewRegistry(map[string]func(ctrl.Manager) error{
		policyhubv1.KindFleetPolicy: (&FleetPolicyReconciler{DeclarationOptions: declarations, Rollouts: rollouts}).SetupWithManager,
		policyhubv1.KindPolicySet: (&PolicySetReconciler{DeclarationOptions: declarations, APIReader: mgr.GetAPIReader(), FluxSources: flux, Flux: fence,
			Rollouts: rollouts}).SetupWithManager,
		policyhubv1.KindApplicationPolicy: (&ApplicationPolicyReconciler{DeclarationOptions: declarations, KubeVela: kubeVela, ClusterSetBindings: bindings,
			ApplicationStatusInterval: o.ApplicationStatusInterval}).SetupWithManager,
		policyhubv1.KindFleetPolicyException: (&FleetPolicyExceptionReconciler{DeclarationOptions: declarations, APIReader: mgr.GetAPIReader(),
			MaxLifetime: o.MaxExceptionLifetime, ApprovableServiceAccounts: o.ApprovableServiceAccounts, Metrics: metrics.NewExceptions(o.Registry)}).SetupWithManager,
	})
}

// fluxFence is the fence of o, or the defaults.
func fluxFence(o HubOptions) (source.FluxFence, error) {
	if o.Flux != nil {
		return *o.Flux, nil
	}
	fence, err := source.NewFluxFence([]string{o.Namespace, source.DefaultFluxNamespace}, source.DefaultFluxStorage)
	if err != nil {
		return source.FluxFence{}, fmt.Errorf("the Flux sources' fence: %w", err)
	}
	return fence, nil
}

// newSharder makes this replica's sharder when o.Replica is set (nil otherwise): the inventory is
// cluster-gateway's credential Secrets (their metadata, from the cache; a Secret's
// policyhubv1.LabelPinnedReplica pins it), and a change of one assigns the fleet again.
func newSharder(ctx context.Context, mgr ctrl.Manager, o HubOptions) (*shard.Sharder, error) {
	if o.Replica == nil {
		return nil, nil
	}
	if err := o.Replica.Validate(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("client for the replicas' Leases: %w", err)
	}
	reader := mgr.GetClient()
	inventory := func(ctx context.Context) ([]shard.Cluster, error) {
		secrets, err := placement.CredentialSecrets(ctx, reader, o.SecretNamespace)
		if err != nil {
			return nil, err
		}
		return shard.FromSecrets(secrets), nil
	}
	sharder := shard.NewSharder(*o.Replica, cs, inventory, shard.DefaultLoadFactor)
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	informer, err := mgr.GetCache().GetInformer(ctx, secretMeta)
	if err != nil {
		return nil, fmt.Errorf("watch the fleet's credential Secrets: %w", err)
	}
	kick := func(any) { sharder.Kick() }
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: kick, DeleteFunc: kick, UpdateFunc: func(_, obj any) { sharder.Kick() },
	}); err != nil {
		return nil, fmt.Errorf("watch the fleet's credential Secrets: %w", err)
	}
	return sharder, nil
}
