package v1alpha1

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pacing: the hub tells each cluster's agent how often it may write, so that the whole fleet's
// agents stay within what the hub's API server is given (a fleet-wide budget of summary writes
// and of Lease renewals a second), whatever the fleet's size. The hub publishes it in each
// summary's status (PolicyReportSummaryStatus.Pacing); the agent reads it back from its own
// writes. An agent that finds none (an older hub) keeps its own flags.

// SummaryPacing is what the hub asks of one cluster's agent.
type SummaryPacing struct {
	// PushInterval is the cluster's share of the fleet's summary budget: the least time between
	// two pushes of a change in pass, warn or skip counts alone. A change the hub must show at
	// once (fail or error counts, blocked admissions, the policies listed, engine facts) goes
	// ahead of it, from a reserve of UrgentPushes pushes refilled one every PushInterval.
	// +kubebuilder:validation:Type=string
	PushInterval metav1.Duration `json:"pushInterval"`

	// HeartbeatInterval is how often the agent renews its Lease: the fleet's renewal budget
	// shared by every cluster. The hub judges the agent silent after three of them.
	// +kubebuilder:validation:Type=string
	HeartbeatInterval metav1.Duration `json:"heartbeatInterval"`

	// Clusters is the fleet size the hub sized these for.
	// +kubebuilder:validation:Minimum=0
	Clusters int32 `json:"clusters"`
}

// Pacing defaults: the budgets the hub's API server is given by default, measured on a 2-core
// hub (docs/benchmarks.md, the busy and quiet fleets), and the floors an agent never goes below.
const (
	// DefaultSummaryBudget is summary writes a second for the whole fleet.
	DefaultSummaryBudget = 10.0
	// DefaultRenewalBudget is agent Lease renewals a second for the whole fleet.
	DefaultRenewalBudget = 10.0
	// MinPushInterval is the shortest PushInterval: the agent's default push interval.
	MinPushInterval = 10 * time.Second
	// MinHeartbeatInterval is the shortest HeartbeatInterval: the agent's default heartbeat.
	MinHeartbeatInterval = time.Minute
	// MaxPacingInterval caps both intervals (the hub's longest heartbeat, aggregate.MaxHeartbeat).
	MaxPacingInterval = time.Hour
	// UrgentPushes is the reserve of pushes an agent may spend on urgent changes ahead of its
	// share; one is refilled every PushInterval.
	UrgentPushes = 6
)

// PacingFor is the pacing of each agent of a fleet of clusters, given the summary writes and
// Lease renewals a second its hub's API server is given (zero or less: the defaults). Each
// interval is the fleet's size over its budget, rounded up to the floor doubled a whole number of
// times (10 s, 20 s, 40 s … ; 1 m, 2 m, 4 m …) so that a fleet growing by a few clusters does not
// change what every agent is told, and capped at MaxPacingInterval.
func PacingFor(clusters int, summaryBudget, renewalBudget float64) SummaryPacing {
	if summaryBudget <= 0 {
		summaryBudget = DefaultSummaryBudget
	}
	if renewalBudget <= 0 {
		renewalBudget = DefaultRenewalBudget
	}
	clusters = max(clusters, 0)
	return SummaryPacing{
		PushInterval:      metav1.Duration{Duration: doubledUpTo(MinPushInterval, float64(clusters)/summaryBudget)},
		HeartbeatInterval: metav1.Duration{Duration: doubledUpTo(MinHeartbeatInterval, float64(clusters)/renewalBudget)},
		Clusters:          int32(min(clusters, math.MaxInt32)),
	}
}

// doubledUpTo is floor doubled until it is at least seconds, at most MaxPacingInterval.
func doubledUpTo(floor time.Duration, seconds float64) time.Duration {
	d := floor
	for d.Seconds() < seconds && d < MaxPacingInterval {
		d *= 2
	}
	return min(d, MaxPacingInterval)
}
