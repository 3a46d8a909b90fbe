package push

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// readPacingEvery is how many Lease renewals pass between two reads of the summary's published
// pacing (one at start): a quiet agent never pushes, so never reads a write's response, and must
// still learn a longer heartbeat; at a thousand agents on the default 1m heartbeat that is under
// two reads a second, served from the apiserver's cache.
const readPacingEvery = 10

// pace is what a Pusher keeps to: its own options, slowed by what the hub published.
type pace struct {
	// Interval is the least time between two pushes (Options.Interval): an urgent change waits
	// that long after the last push.
	Interval time.Duration
	// PushInterval is the cluster's share: the least time between two pushes of a change that is
	// not urgent, and how often one push of the reserve is refilled.
	PushInterval time.Duration
	// Beat is how often the Lease is renewed, and the heartbeat the summary announces.
	Beat time.Duration
}

// published is the pacing the hub published, checked: zero where it published none.
type published struct {
	Push, Beat time.Duration
	// Clusters is the fleet size the hub sized them for (for the log only).
	Clusters int32
}

// paceOf is the pace of an agent with options o under the hub's pub: the agent's flags are
// floors (an operator may slow an agent further, never speed it past its share).
func paceOf(o Options, pub published) pace {
	return pace{
		Interval:     o.Interval,
		PushInterval: max(o.Interval, pub.Push),
		Beat:         max(o.beat(), pub.Beat),
	}
}

// checkPacing is the pacing the hub published, bounded: read from the hub's API it is hostile
// until checked. A missing pacing (an older hub, or a summary the hub has not seen yet) is none;
// an interval left out (zero) is not published; one out of bounds (below its floor, over
// MaxPacingInterval, negative) is clamped into them, and problem says so.
func checkPacing(p *policyhubv1.SummaryPacing) (pub published, problem string) {
	if p == nil {
		return published{}, ""
	}
	var problems []string
	bound := func(name string, d, floor time.Duration) time.Duration {
		switch {
		case d == 0:
			return 0
		case d < floor:
			problems = append(problems, fmt.Sprintf("%s %s below %s", name, d, floor))
			return floor
		case d > policyhubv1.MaxPacingInterval:
			problems = append(problems, fmt.Sprintf("%s %s over %s", name, d, policyhubv1.MaxPacingInterval))
			return policyhubv1.MaxPacingInterval
		}
		return d
	}
	pub.Push = bound("pushInterval", p.PushInterval.Duration, policyhubv1.MinPushInterval)
	pub.Beat = bound("heartbeatInterval", p.HeartbeatInterval.Duration, policyhubv1.MinHeartbeatInterval)
	pub.Clusters = max(p.Clusters, 0)
	return pub, strings.Join(problems, "; ")
}

// pace is what the Pusher keeps to now.
func (p *Pusher) pace() pace {
	p.mu.Lock()
	defer p.mu.Unlock()
	return paceOf(p.opts, p.published)
}

// learn takes the pacing read back from the hub (from where: a write's response, or a read of
// the summary). A problem with it is logged once (until it changes); a change of pace is logged
// once, old and new, and wakes both loops, so a shorter interval is kept at once and a new
// heartbeat reaches the Lease at its next renewal.
func (p *Pusher) learn(ctx context.Context, read PacingRead, from string) {
	pub, problem := checkPacing(read.Pacing)
	p.mu.Lock()
	if read.Unreadable != "" {
		pub, problem = p.published, read.Unreadable // keep what was known
	}
	before := paceOf(p.opts, p.published)
	loggedProblem := p.pacingProblem
	p.published, p.pacingProblem = pub, problem
	after := paceOf(p.opts, p.published)
	p.mu.Unlock()

	logger := log.FromContext(ctx).WithValues("cluster", p.opts.Cluster)
	if problem != "" && problem != loggedProblem {
		logger.Info("the hub's published pacing is out of bounds or unreadable; keeping to the bounds (or the current pace)", "problem", problem, "from", from)
	}
	if before == after {
		return
	}
	why := fmt.Sprintf("the hub publishes pushInterval %s and heartbeatInterval %s for %d clusters; the agent's own are %s and %s",
		pub.Push, pub.Beat, pub.Clusters, p.opts.Interval, p.opts.beat())
	if pub == (published{}) {
		why = "the hub publishes no pacing: the agent's own intervals"
	}
	logger.Info("the agent's pace changed", "pushInterval", fmt.Sprintf("%s → %s", before.PushInterval, after.PushInterval),
		"heartbeat", fmt.Sprintf("%s → %s", before.Beat, after.Beat), "why", why, "from", from)
	wake(p.pushWake)
	wake(p.renewWake)
}

// readPacing reads the summary's published pacing (not there yet: nothing learned); a failure
// is the next read's to mend, logged at V(1) only.
func (p *Pusher) readPacing(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	got, found, err := p.writes.Pacing(ctx)
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading the hub's pacing failed; keeping the current pace", "cluster", p.opts.Cluster, "error", err.Error())
		return
	}
	if found {
		p.learn(ctx, got, "a read of the summary")
	}
}

// wake signals c without blocking (buffered 1: signals coalesce).
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
