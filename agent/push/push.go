package push

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// SummaryName is the name of every cluster's summary object in its hub namespace.
const SummaryName = policyhubv1.SummaryName

// FieldManager is the server-side apply field manager of the agent's writes to the hub.
const FieldManager = "policyhub-agent"

// Defaults of Options.
const (
	DefaultInterval   = 10 * time.Second
	DefaultHeartbeat  = time.Minute
	DefaultMaxBackoff = time.Minute
)

// firstBackoff is the wait after the first failed push; each further failure doubles it, up to
// Options.MaxBackoff.
const firstBackoff = time.Second

// attemptTimeout bounds one write, so a hub that accepts connections but never answers does not
// hold the Pusher forever (changes meanwhile are not lost: they are pushed by the next attempt).
const attemptTimeout = 30 * time.Second

// Options configure a Pusher.
type Options struct {
	// Cluster is the managed cluster's name; required. The hub namespace written to is the cluster name.
	Cluster string
	// Interval is the minimum time between pushes; 0 means DefaultInterval (10s).
	Interval time.Duration
	// Heartbeat: an unchanged summary is pushed again this often (only generatedAt changes), so the
	// hub can tell a live agent; 0 means DefaultHeartbeat (1m). A Heartbeat shorter than Interval
	// acts as Interval.
	Heartbeat time.Duration
	// MaxBackoff caps the wait between retries after failed pushes (starting at 1s, doubling);
	// 0 means DefaultMaxBackoff (1m).
	MaxBackoff time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Pusher pushes one cluster's PolicyReportSummary to the hub. Create it with New; call Run once.
type Pusher struct {
	hub    client.Client
	opts   Options
	pushes atomic.Int64
}

// New returns a Pusher writing through hub, a client of the hub whose identity may write
// PolicyReportSummaries in the namespace o.Cluster.
func New(hub client.Client, o Options) (*Pusher, error) {
	if hub == nil {
		return nil, errors.New("push: no hub client")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pusher{hub: hub, opts: o}, nil
}

// withDefaults checks o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Cluster == "" {
		return o, errors.New("push: Options.Cluster is required")
	}
	if errs := validation.IsDNS1123Label(o.Cluster); len(errs) > 0 {
		return o, fmt.Errorf("push: cluster %q is not a valid hub namespace name: %s", o.Cluster, strings.Join(errs, "; "))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", o.Interval}, {"Heartbeat", o.Heartbeat}, {"MaxBackoff", o.MaxBackoff}} {
		if d.v < 0 {
			return o, fmt.Errorf("push: Options.%s is negative (%s)", d.name, d.v)
		}
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Pushes counts successful writes (for tests and metrics).
func (p *Pusher) Pushes() int64 { return p.pushes.Load() }

// Run pushes until ctx ends, then returns nil. changed signals (coalesced; a channel buffered 1
// suits) that the content may have changed; a nil channel means it never does (heartbeats only).
// build returns the current summary spec with its ContentHash set; Run sets Cluster, GeneratedAt
// and HeartbeatInterval. build is called from Run's goroutine, right before every write attempt,
// and on a change signal once Interval has passed, to compare hashes.
//
// Run never returns on hub errors: it logs them through the logger of ctx and retries with
// backoff, rebuilding before each attempt, so the write that succeeds after an outage carries the
// latest content. Call Run once per Pusher.
func (p *Pusher) Run(ctx context.Context, changed <-chan struct{}, build func() policyhubv1.PolicyReportSummarySpec) error {
	if build == nil {
		return errors.New("push: Run needs a build function")
	}
	logger := log.FromContext(ctx).WithValues("cluster", p.opts.Cluster)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var s state
	for {
		if ctx.Err() != nil {
			return nil
		}
		now := p.opts.Now()
		next, force := decide(s, now, p.opts.Interval, p.opts.Heartbeat)
		if next.After(now) {
			// Since Go 1.23 Reset needs no draining: no stale tick is delivered after it.
			timer.Reset(next.Sub(now))
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				s.Pending = true
			case <-timer.C:
			}
			continue
		}

		spec := build()
		// The build covers every change signalled so far; a later signal waits in the channel.
		s.Pending = false
		if !needsWrite(force, spec.ContentHash, s.LastHash) {
			continue
		}
		at := p.opts.Now()
		err := p.apply(ctx, spec, at)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.Failures++
			wait := backoff(s.Failures, p.opts.MaxBackoff)
			s.RetryAt = p.opts.Now().Add(wait)
			logger.Error(err, "push the summary to the hub; retrying", "attempt", s.Failures, "retryIn", wait)
			continue
		}
		if s.Failures > 0 {
			logger.Info("pushed the summary to the hub after failed attempts", "failedAttempts", s.Failures, "contentHash", spec.ContentHash)
		} else {
			logger.V(1).Info("pushed the summary to the hub", "contentHash", spec.ContentHash)
		}
		p.pushes.Add(1)
		s = state{Pushed: true, LastPush: p.opts.Now(), LastHash: spec.ContentHash}
	}
}

// apply writes spec as the cluster's summary by server-side apply; it never writes status.
func (p *Pusher) apply(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) error {
	obj, err := p.summaryObject(spec, at)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	if err := p.hub.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s/%s on the hub: %w", p.opts.Cluster, SummaryName, err)
	}
	return nil
}

// summaryObject is the object applied: only apiVersion, kind, namespace, name and spec, so the
// agent owns nothing else (status is the hub's).
func (p *Pusher) summaryObject(spec policyhubv1.PolicyReportSummarySpec, at time.Time) (*unstructured.Unstructured, error) {
	spec.Cluster = p.opts.Cluster
	generated := metav1.NewTime(at)
	spec.GeneratedAt = &generated
	spec.HeartbeatInterval = &metav1.Duration{Duration: max(p.opts.Heartbeat, p.opts.Interval)}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, fmt.Errorf("push: encode the summary: %w", err)
	}
	// Zero counts and false are omitted from JSON. Applied as an empty object, a struct whose
	// fields this manager owned would lose them all and turn null on the hub, which the schema
	// refuses: every count and the webhook flag are sent explicitly.
	t := spec.Totals
	content["totals"] = map[string]any{"pass": t.Pass, "fail": t.Fail, "warn": t.Warn, "error": t.Error, "skip": t.Skip}
	engine, _ := content["engine"].(map[string]any)
	if engine == nil {
		engine = map[string]any{}
	}
	engine["kyvernoWebhooks"] = spec.Engine.KyvernoWebhooks
	content["engine"] = engine
	// spec.policies is a map list keyed by name, namespace and kind: the keys are sent even when
	// empty (the CRD defaults them), so the apply does not depend on the apiserver's defaulting
	// of list keys.
	if policies, ok := content["policies"].([]any); ok {
		for _, p := range policies {
			if entry, ok := p.(map[string]any); ok {
				for _, key := range []string{"namespace", "kind"} {
					if _, set := entry[key]; !set {
						entry[key] = ""
					}
				}
			}
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": content}}
	obj.SetAPIVersion(policyhubv1.GroupVersion.String())
	obj.SetKind("PolicyReportSummary")
	obj.SetNamespace(p.opts.Cluster)
	obj.SetName(SummaryName)
	return obj, nil
}

// state is what Run knows between two decisions.
type state struct {
	// Pushed: a write has succeeded.
	Pushed bool
	// LastPush is when the last successful write ended.
	LastPush time.Time
	// LastHash is the ContentHash of the last successful write.
	LastHash string
	// Pending: a change was signalled and not yet looked at.
	Pending bool
	// Failures counts write attempts failed since the last success.
	Failures int
	// RetryAt is the earliest next attempt after a failure.
	RetryAt time.Time
}

// decide says when Run next builds the summary (next; at or before now means now) and whether
// that build is written even if its hash is the last pushed one (force):
//   - nothing pushed yet and no failure: now, forced (the push at start);
//   - after a failure: at RetryAt (not sooner than Interval after the last success), forced,
//     because whether the failed write landed is unknown;
//   - a change pending: Interval after the last push, forced only if the heartbeat is due by now;
//   - otherwise: at the heartbeat (Heartbeat, at least Interval, after the last push), forced.
func decide(s state, now time.Time, interval, heartbeat time.Duration) (next time.Time, force bool) {
	if s.Failures > 0 {
		next = s.RetryAt
		if s.Pushed {
			next = later(next, s.LastPush.Add(interval))
		}
		return next, true
	}
	if !s.Pushed {
		return now, true
	}
	beat := s.LastPush.Add(max(heartbeat, interval))
	if s.Pending {
		next = s.LastPush.Add(interval)
	} else {
		next = beat
	}
	return next, !now.Before(beat)
}

// needsWrite says whether a build with content hash hash is written: when forced, when it differs
// from the last pushed one, or when it has no hash (nothing to compare).
func needsWrite(force bool, hash, lastHash string) bool {
	return force || hash == "" || hash != lastHash
}

// backoff is the wait after the failures-th consecutive failed attempt: 1s, doubling, at most
// maxWait.
func backoff(failures int, maxWait time.Duration) time.Duration {
	d := firstBackoff
	for i := 1; i < failures && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
