package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent/collect"
	"github.com/policyhub/policyhub/agent/evaluate"
	"github.com/policyhub/policyhub/agent/push"
	"github.com/policyhub/policyhub/agent/summarize"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Options configure an agent.
type Options struct {
	// Cluster is the managed cluster's name: its namespace on the hub.
	Cluster string
	// Managed reaches the managed cluster; Hub reaches the hub with the agent's own identity.
	Managed, Hub *rest.Config
	// ApplicationLabel names a resource's application; empty means app.oam.dev/name.
	ApplicationLabel string
	// KyvernoNamespace is where Kyverno's controllers' Deployments are, read for its version and
	// settings; empty means kyverno.
	KyvernoNamespace string
	// KyvernoMetricsURLs are Kyverno's admission controller metrics endpoints, one per replica,
	// read to count server-side dry-runs apart from refused admissions; empty means its Pods'
	// (podIP:8000, or their metrics-port) in KyvernoNamespace.
	KyvernoMetricsURLs []string
	// PushInterval is the least time between two pushes; zero means 10s.
	PushInterval time.Duration
	// Heartbeat is how often the agent renews its Lease on the hub so the hub can tell it is
	// alive (it marks results stale after three missed renewals); zero means 1m. An unchanged
	// summary is not pushed again.
	Heartbeat time.Duration
	// MaxViolations bounds the violations kept in a summary; zero means 50.
	MaxViolations int
	// DiscoveryInterval is how often newly served report APIs are looked for; zero means 30s.
	DiscoveryInterval time.Duration
	// AdmissionPolicyInterval is how often the cluster's objects are evaluated again against
	// its ValidatingAdmissionPolicies (a policy or binding change is evaluated at once); zero
	// means 1m.
	AdmissionPolicyInterval time.Duration
	// NoAdmissionPolicies turns the background evaluation of ValidatingAdmissionPolicies off.
	NoAdmissionPolicies bool
	// AdmissionPolicyMaxObjects bounds the objects the evaluation reads in all; zero means
	// 50,000 (results take some 2 KiB an object at 20 policies).
	AdmissionPolicyMaxObjects int
	// SyncTimeout bounds the wait for the first full read of the cluster before the first push
	// (an empty summary would claim a clean cluster); zero means 2m, after which what is known is pushed.
	SyncTimeout time.Duration
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Cluster == "" {
		return errors.New("the cluster name is required")
	}
	if o.Managed == nil || o.Hub == nil {
		return errors.New("both the managed cluster's and the hub's configs are required")
	}
	scheme := runtime.NewScheme()
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		return err
	}
	// The agent's Lease on the hub (push.LeaseName) is applied typed.
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return err
	}
	hub, err := client.New(o.Hub, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	var sources []collect.Source
	if !o.NoAdmissionPolicies {
		vap, err := evaluate.New(o.Managed, evaluate.Options{Interval: o.AdmissionPolicyInterval, ApplicationLabel: o.ApplicationLabel,
			MaxObjects: o.AdmissionPolicyMaxObjects})
		if err != nil {
			return fmt.Errorf("cluster %s: %w", o.Cluster, err)
		}
		sources = append(sources, vap)
	}
	collector, err := collect.New(o.Managed, collect.Options{
		ApplicationLabel: o.ApplicationLabel, DiscoveryInterval: o.DiscoveryInterval, KyvernoNamespace: o.KyvernoNamespace,
		KyvernoMetricsURLs: o.KyvernoMetricsURLs, Sources: sources,
	})
	if err != nil {
		return fmt.Errorf("cluster %s: %w", o.Cluster, err)
	}
	pusher, err := push.New(hub, push.Options{Cluster: o.Cluster, Interval: o.PushInterval, Heartbeat: o.Heartbeat})
	if err != nil {
		return err
	}
	return run(ctx, o, pusher, collector)
}

// source is what run needs of the collector.
type source interface {
	Run(ctx context.Context) error
	Synced() bool
	Changed() <-chan struct{}
	Snapshot() collect.Snapshot
}

// run collects from src and pushes through pusher until ctx ends.
func run(ctx context.Context, o Options, pusher *push.Pusher, src source) error {
	// When the pushes end (ctx ended), so do the collector and the renewals.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	collected := make(chan error, 1)
	go func() { collected <- src.Run(ctx) }()
	// Liveness first: the Lease is renewed at once, so the hub sees a (re)started agent alive
	// within seconds, while the first full read of the cluster may take up to SyncTimeout.
	var renewing sync.WaitGroup
	renewing.Go(func() { pusher.RenewLease(ctx) })

	if !waitSynced(ctx, src, o.SyncTimeout) && ctx.Err() == nil {
		log.FromContext(ctx).Info("the cluster's reports are not fully read yet; pushing what is known", "cluster", o.Cluster)
	}
	build := func() policyhubv1.PolicyReportSummarySpec {
		return summarize.Summarize(src.Snapshot(), summarize.Options{Cluster: o.Cluster, MaxViolations: o.MaxViolations})
	}
	err := pusher.PushSummary(ctx, src.Changed(), build)
	stop()
	renewing.Wait()
	if cerr := <-collected; err == nil {
		err = cerr
	}
	return err
}

// waitSynced polls until the collector has read the cluster once, for at most timeout.
func waitSynced(ctx context.Context, c interface{ Synced() bool }, timeout time.Duration) bool {
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !c.Synced() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
