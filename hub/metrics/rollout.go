package metrics

import (
	"maps"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// rolloutStates are the values of the state label of policyhub_rollout_wave_state: the wave
// phases, lower-cased as the other metrics' label values are.
var rolloutStates = []policyhubv1.WavePhase{
	policyhubv1.WavePending, policyhubv1.WaveAuditing, policyhubv1.WaveWaiting,
	policyhubv1.WaveEnforcing, policyhubv1.WaveDone,
}

// Rollout exposes the progressive rollouts of FleetPolicies and PolicySets (policy label
// pset/NAME), from their status.rollout: each
// wave's state (kube-state-metrics style: one series per state, 1 for the wave's and 0 for the
// others), when it entered it, and the gate's last measured values. Like Compliance, it is a
// collector over the latest status of each policy rather than a set of gauges: Set replaces a
// policy's series at once (a wave gone from the spec goes from the metrics, and a scrape never
// sees half of an update), Delete removes them. Labels are policy × wave (at most
// policyhubv1.MaxRolloutWaves) × state (five values).
type Rollout struct {
	mu       sync.Mutex
	policies map[string][]rolloutWave

	state, since, fail, blocked, legacy *prometheus.Desc
}

// rolloutWave is what the metrics show of a wave's status.
type rolloutWave struct {
	name    string
	phase   policyhubv1.WavePhase
	since   *float64 // unix seconds; nil when the status has no since
	fail    int64
	blocked int64
	legacy  *int64 // nil unless the wave's gate measures legacy objects
}

// NewRollout creates the rollout metrics and registers them with reg.
func NewRollout(reg prometheus.Registerer) *Rollout {
	m := &Rollout{
		policies: map[string][]rolloutWave{},
		state: prometheus.NewDesc("policyhub_rollout_wave_state",
			"1 for the state a FleetPolicy's or PolicySet's (policy=pset/NAME) rollout wave is in (pending, auditing, waiting, enforcing, done), 0 for the other four.",
			[]string{"policy", "wave", "state"}, nil),
		since: prometheus.NewDesc("policyhub_rollout_wave_state_since_timestamp_seconds",
			"Unix time a FleetPolicy's or PolicySet's (policy=pset/NAME) rollout wave entered its current state.",
			[]string{"policy", "wave"}, nil),
		fail: prometheus.NewDesc("policyhub_rollout_wave_fail_results",
			"Fail results of the policy summed over a rollout wave's clusters, as the wave's gate last measured them.",
			[]string{"policy", "wave"}, nil),
		blocked: prometheus.NewDesc("policyhub_rollout_wave_blocked_admissions",
			"Admissions the policy would have blocked, summed over a rollout wave's clusters, as the wave's gate last measured them.",
			[]string{"policy", "wave"}, nil),
		legacy: prometheus.NewDesc("policyhub_rollout_wave_legacy_objects",
			"Kyverno legacy objects (owned or not) summed over a rollout wave's clusters, as the wave's gate (maxLegacyObjects) last measured them; only waves with that gate have the series.",
			[]string{"policy", "wave"}, nil),
	}
	reg.MustRegister(m)
	return m
}

// Set records the rollout status of a FleetPolicy, replacing every series it had. A nil status
// (the policy has no rollout) is Delete. A wave without a since has no since series; a wave in
// a phase this package does not know has its five state series at 0.
func (m *Rollout) Set(policy string, st *policyhubv1.RolloutStatus) {
	if st == nil {
		m.Delete(policy)
		return
	}
	waves := make([]rolloutWave, 0, min(len(st.Waves), policyhubv1.MaxRolloutWaves))
	seen := map[string]bool{}
	for _, w := range st.Waves {
		// The API bounds and names the waves uniquely; should a status not, the cardinality
		// stays bounded and a wave's series are not collected twice (which fails the scrape).
		if len(waves) == policyhubv1.MaxRolloutWaves {
			break
		}
		if seen[w.Name] {
			continue
		}
		seen[w.Name] = true
		rw := rolloutWave{name: w.Name, phase: w.Phase, fail: w.Fail, blocked: w.Blocked}
		if w.LegacyObjects != nil {
			n := *w.LegacyObjects
			rw.legacy = &n
		}
		if w.Since != nil {
			since := float64(w.Since.UnixNano()) / 1e9
			rw.since = &since
		}
		waves = append(waves, rw)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policies[policy] = waves
}

// Delete removes every series of a FleetPolicy (it was deleted, or no longer has a rollout).
func (m *Rollout) Delete(policy string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.policies, policy)
}

// Describe implements prometheus.Collector.
func (m *Rollout) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.state, m.since, m.fail, m.blocked, m.legacy} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Rollout) Collect(ch chan<- prometheus.Metric) {
	// Stored waves are never changed, only replaced: the scrape works on a snapshot.
	m.mu.Lock()
	policies := maps.Clone(m.policies)
	m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for policy, waves := range policies {
		for _, w := range waves {
			for _, s := range rolloutStates {
				v := 0.0
				if w.phase == s {
					v = 1
				}
				gauge(m.state, v, policy, w.name, strings.ToLower(string(s)))
			}
			if w.since != nil {
				gauge(m.since, *w.since, policy, w.name)
			}
			gauge(m.fail, float64(w.fail), policy, w.name)
			gauge(m.blocked, float64(w.blocked), policy, w.name)
			if w.legacy != nil {
				gauge(m.legacy, float64(*w.legacy), policy, w.name)
			}
		}
	}
}
