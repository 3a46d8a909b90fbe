package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/placement"
)

// PacingOptions are the budgets the hub's API server is given for the whole fleet's agents; each
// agent is told its share.
type PacingOptions struct {
	// SummaryBudget is summary writes a second; zero or less means
	// policyhubv1.DefaultSummaryBudget.
	SummaryBudget float64
	// RenewalBudget is agent Lease renewals a second; zero or less means
	// policyhubv1.DefaultRenewalBudget.
	RenewalBudget float64
}

// fleetPacing is the pacing the hub publishes for a fleet, as the fleet's size changes: pure,
// so what a change of size does to every agent is a table test.
type fleetPacing struct {
	summaryBudget, renewalBudget float64
	current                      policyhubv1.SummaryPacing
	known                        bool
}

// observe takes in the fleet's size and says the pacing to publish for it, and whether its
// intervals differ from those published so far, in which case every summary must be looked at
// again (its agent may be quiet, and learns it only from a write of its status). The first size
// taken in is no change: no summary has been given a pacing before it.
func (f *fleetPacing) observe(clusters int) (policyhubv1.SummaryPacing, bool) {
	p := policyhubv1.PacingFor(clusters, f.summaryBudget, f.renewalBudget)
	changed := f.known && !samePace(p, f.current)
	f.current, f.known = p, true
	return p, changed
}

// samePace says whether two pacings ask the same of an agent: their intervals, whatever the
// fleet size each was sized for.
func samePace(a, b policyhubv1.SummaryPacing) bool {
	return a.PushInterval == b.PushInterval && a.HeartbeatInterval == b.HeartbeatInterval
}

// publishPacing puts pacing in the summary's status unless the status already asks the same of
// the agent: a fleet growing or shrinking within a step writes no summary (onboarding a fleet one
// cluster at a time would otherwise write every summary each time), and hubs (replicas, one
// taking over) that counted the fleet at different moments do not rewrite each other's. Clusters
// is then the fleet's size when the summary's pacing last changed.
// A hub that publishes none (nil) removes what the status holds: its agent then keeps its own
// flags, and is judged by the heartbeat it says.
func publishPacing(s *policyhubv1.PolicyReportSummary, pacing *policyhubv1.SummaryPacing) {
	if pacing == nil {
		s.Status.Pacing = nil
		return
	}
	if old := s.Status.Pacing; old != nil && samePace(*old, *pacing) {
		return
	}
	s.Status.Pacing = pacing
}

// Pacer publishes each agent's pacing: its share of the summary writes and Lease renewals a
// second the hub's API server is given, for the whole fleet's size (cluster-gateway's credential
// Secrets, which every replica caches whole, even when it works only a share of the fleet). When
// the fleet's size crosses a step of an interval it wakes every summary this replica caches, so
// each summary's status is written with the new pacing once; the agents read it back from their
// writes.
type Pacer struct {
	reader          client.Reader
	secretNamespace string
	// wake enqueues summaries in the summary controller.
	wake func(keys ...types.NamespacedName)
	kick chan struct{}

	mu     sync.Mutex
	pacing fleetPacing
}

// NewPacer makes the pacer of a fleet whose credential Secrets are in secretNamespace, with the
// budgets given (zero or less: the defaults), reading through the cached reader. wake enqueues
// summaries to check again.
func NewPacer(reader client.Reader, secretNamespace string, summaryBudget, renewalBudget float64, wake func(keys ...types.NamespacedName)) *Pacer {
	return &Pacer{
		reader: reader, secretNamespace: secretNamespace, wake: wake, kick: make(chan struct{}, 1),
		pacing: fleetPacing{summaryBudget: summaryBudget, renewalBudget: renewalBudget},
	}
}

// Current is the pacing published now. The first call counts the fleet (from the cache), so
// the first summaries checked already carry it.
func (p *Pacer) Current(ctx context.Context) (policyhubv1.SummaryPacing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pacing.known {
		return p.pacing.current, nil
	}
	n, err := p.count(ctx)
	if err != nil {
		return policyhubv1.SummaryPacing{}, err
	}
	pacing, _ := p.pacing.observe(n)
	return pacing, nil
}

// Watch counts the fleet again whenever a credential Secret comes, goes or changes.
func (p *Pacer) Watch(ctx context.Context, c cache.Cache) error {
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	informer, err := c.GetInformer(ctx, secretMeta)
	if err != nil {
		return fmt.Errorf("watch the fleet's credential Secrets for its size: %w", err)
	}
	kick := func(any) { p.Kick() }
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: kick, DeleteFunc: kick, UpdateFunc: func(_, _ any) { p.Kick() },
	}); err != nil {
		return fmt.Errorf("watch the fleet's credential Secrets for its size: %w", err)
	}
	return nil
}

// Kick asks for the fleet to be counted again; kicks coalesce (a thousand Secrets listed at
// start are one count).
func (p *Pacer) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Start counts the fleet on each kick until ctx ends, waking every summary when the pacing
// changes.
func (p *Pacer) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		}
		if err := p.recount(ctx); err != nil {
			log.FromContext(ctx).Error(err, "count the fleet for its agents' pacing")
		}
	}
}

// recount counts the fleet, and wakes every summary this replica caches when the pacing changed.
func (p *Pacer) recount(ctx context.Context) error {
	p.mu.Lock()
	n, err := p.count(ctx)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	pacing, changed := p.pacing.observe(n)
	p.mu.Unlock()
	if !changed {
		return nil
	}
	summaries := &policyhubv1.PolicyReportSummaryList{}
	if err := p.reader.List(ctx, summaries, engine.ReadOnlyList); err != nil {
		return fmt.Errorf("list the summaries to publish their new pacing: %w", err)
	}
	log.FromContext(ctx).Info("the agents' pacing changed with the fleet's size", "clusters", n,
		"pushInterval", pacing.PushInterval.Duration, "heartbeatInterval", pacing.HeartbeatInterval.Duration, "summaries", len(summaries.Items))
	p.wake(keysOf(summaries.Items)...)
	return nil
}

// count is the fleet's size: its credential Secrets.
func (p *Pacer) count(ctx context.Context) (int, error) {
	secrets, err := placement.CredentialSecrets(ctx, p.reader, p.secretNamespace)
	if err != nil {
		return 0, err
	}
	return len(secrets), nil
}
