package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var rolloutMetricNames = []string{
	"policyhub_rollout_wave_state", "policyhub_rollout_wave_state_since_timestamp_seconds",
	"policyhub_rollout_wave_fail_results", "policyhub_rollout_wave_blocked_admissions",
}

const rolloutHelp = `
# HELP policyhub_rollout_wave_blocked_admissions Admissions the policy would have blocked, summed over a rollout wave's clusters, as the wave's gate last measured them.
# TYPE policyhub_rollout_wave_blocked_admissions gauge
# HELP policyhub_rollout_wave_fail_results Fail results of the policy summed over a rollout wave's clusters, as the wave's gate last measured them.
# TYPE policyhub_rollout_wave_fail_results gauge
# HELP policyhub_rollout_wave_state 1 for the state a FleetPolicy's or PolicySet's (policy=pset/NAME) rollout wave is in (pending, auditing, waiting, enforcing, done), 0 for the other four.
# TYPE policyhub_rollout_wave_state gauge
# HELP policyhub_rollout_wave_state_since_timestamp_seconds Unix time a FleetPolicy's or PolicySet's (policy=pset/NAME) rollout wave entered its current state.
# TYPE policyhub_rollout_wave_state_since_timestamp_seconds gauge
`

func TestRolloutMetrics(t *testing.T) {
	t0 := time.Unix(1_790_000_000, 0)
	since := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	// Three waves: staging done, prod-eu waiting on its gate, prod-us not reached yet.
	threeWaves := &policyhubv1.RolloutStatus{Revision: "r1", CurrentWave: "prod-eu", Waves: []policyhubv1.WaveStatus{
		{Name: "staging", Phase: policyhubv1.WaveDone, Since: since(0), Clusters: 2},
		{Name: "prod-eu", Phase: policyhubv1.WaveWaiting, Since: since(time.Hour), Clusters: 5, Fail: 3, Blocked: 1, Reason: "fail 3 > maxFail 0"},
		{Name: "prod-us", Phase: policyhubv1.WavePending},
	}}
	threeWavesWant := `
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="prod-eu"} 1
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="prod-us"} 0
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="staging"} 0
policyhub_rollout_wave_fail_results{policy="require-labels",wave="prod-eu"} 3
policyhub_rollout_wave_fail_results{policy="require-labels",wave="prod-us"} 0
policyhub_rollout_wave_fail_results{policy="require-labels",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="prod-eu"} 0
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="prod-eu"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="staging"} 1
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="prod-eu"} 0
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="prod-eu"} 0
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="prod-us"} 1
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="prod-eu"} 1
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="staging"} 0
policyhub_rollout_wave_state_since_timestamp_seconds{policy="require-labels",wave="prod-eu"} 1.7900036e+09
policyhub_rollout_wave_state_since_timestamp_seconds{policy="require-labels",wave="staging"} 1.79e+09
`

	for _, c := range []struct {
		name string
		run  func(m *Rollout)
		want string // the four families, without their HELP and TYPE lines; "" for none
	}{{
		name: "every wave's state, since and gate values",
		run:  func(m *Rollout) { m.Set("require-labels", threeWaves) },
		want: threeWavesWant,
	}, {
		name: "setting the same status again changes nothing",
		run: func(m *Rollout) {
			m.Set("require-labels", threeWaves)
			m.Set("require-labels", threeWaves.DeepCopy())
		},
		want: threeWavesWant,
	}, {
		name: "a wave removed from the spec between two Sets disappears, the others follow their new status",
		run: func(m *Rollout) {
			m.Set("require-labels", threeWaves)
			m.Set("require-labels", &policyhubv1.RolloutStatus{Waves: []policyhubv1.WaveStatus{
				{Name: "staging", Phase: policyhubv1.WaveDone, Since: since(0)},
				{Name: "prod-us", Phase: policyhubv1.WaveAuditing, Since: since(2 * time.Hour), Fail: 7},
			}})
		},
		want: `
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="prod-us"} 0
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="staging"} 0
policyhub_rollout_wave_fail_results{policy="require-labels",wave="prod-us"} 7
policyhub_rollout_wave_fail_results{policy="require-labels",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="prod-us"} 1
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="staging"} 1
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="staging"} 0
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="prod-us"} 0
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="staging"} 0
policyhub_rollout_wave_state_since_timestamp_seconds{policy="require-labels",wave="prod-us"} 1.7900072e+09
policyhub_rollout_wave_state_since_timestamp_seconds{policy="require-labels",wave="staging"} 1.79e+09
`,
	}, {
		name: "Delete removes the policy's series only",
		run: func(m *Rollout) {
			m.Set("require-labels", threeWaves)
			m.Set("no-latest", &policyhubv1.RolloutStatus{Waves: []policyhubv1.WaveStatus{
				{Name: "all", Phase: policyhubv1.WaveEnforcing, Since: since(0), Blocked: 2},
			}})
			m.Delete("require-labels")
			m.Delete("never-set")
		},
		want: `
policyhub_rollout_wave_blocked_admissions{policy="no-latest",wave="all"} 2
policyhub_rollout_wave_fail_results{policy="no-latest",wave="all"} 0
policyhub_rollout_wave_state{policy="no-latest",state="auditing",wave="all"} 0
policyhub_rollout_wave_state{policy="no-latest",state="done",wave="all"} 0
policyhub_rollout_wave_state{policy="no-latest",state="enforcing",wave="all"} 1
policyhub_rollout_wave_state{policy="no-latest",state="pending",wave="all"} 0
policyhub_rollout_wave_state{policy="no-latest",state="waiting",wave="all"} 0
policyhub_rollout_wave_state_since_timestamp_seconds{policy="no-latest",wave="all"} 1.79e+09
`,
	}, {
		name: "a nil status is Delete",
		run: func(m *Rollout) {
			m.Set("require-labels", threeWaves)
			m.Set("require-labels", nil)
		},
	}, {
		name: "an empty status has no series",
		run:  func(m *Rollout) { m.Set("require-labels", &policyhubv1.RolloutStatus{}) },
	}, {
		name: "a phase this package does not know: every state 0",
		run: func(m *Rollout) {
			m.Set("require-labels", &policyhubv1.RolloutStatus{Waves: []policyhubv1.WaveStatus{{Name: "all"}}})
		},
		want: `
policyhub_rollout_wave_blocked_admissions{policy="require-labels",wave="all"} 0
policyhub_rollout_wave_fail_results{policy="require-labels",wave="all"} 0
policyhub_rollout_wave_state{policy="require-labels",state="auditing",wave="all"} 0
policyhub_rollout_wave_state{policy="require-labels",state="done",wave="all"} 0
policyhub_rollout_wave_state{policy="require-labels",state="enforcing",wave="all"} 0
policyhub_rollout_wave_state{policy="require-labels",state="pending",wave="all"} 0
policyhub_rollout_wave_state{policy="require-labels",state="waiting",wave="all"} 0
`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m := NewRollout(reg)
			c.run(m)
			want := ""
			if c.want != "" {
				want = rolloutHelp + c.want
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), rolloutMetricNames...); err != nil {
				t.Error(err)
			}
		})
	}
}

// A status the API would refuse still gives bounded series that scrape: at most
// MaxRolloutWaves waves, each once.
func TestRolloutMetricsBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewRollout(reg)
	st := &policyhubv1.RolloutStatus{}
	for i := range policyhubv1.MaxRolloutWaves + 5 {
		st.Waves = append(st.Waves, policyhubv1.WaveStatus{Name: fmt.Sprintf("wave-%d", i), Phase: policyhubv1.WaveAuditing, Since: &metav1.Time{Time: time.Unix(1, 0)}})
	}
	st.Waves[1].Name = "wave-0" // a duplicate: collected once
	m.Set("p", st)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	// 19 distinct waves among the first 20, and the first one after them: 20 waves of 8 series.
	if n := testutil.CollectAndCount(m); n != policyhubv1.MaxRolloutWaves*8 {
		t.Errorf("%d series, want %d", n, policyhubv1.MaxRolloutWaves*8)
	}
	states := rolloutSeries(t, reg, "policyhub_rollout_wave_state")
	for key, want := range map[string]float64{"p/wave-0/auditing": 1, "p/wave-0/pending": 0, "p/wave-20/auditing": 1} {
		if got, ok := states[key]; !ok || got != want {
			t.Errorf("%s: %v (present %v), want %v", key, got, ok, want)
		}
	}
	if _, ok := states["p/wave-21/auditing"]; ok {
		t.Errorf("wave-21 has series: more than %d waves", policyhubv1.MaxRolloutWaves)
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// rolloutSeries are the values of a family's series, by policy/wave[/state].
func rolloutSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			key := l["policy"] + "/" + l["wave"]
			if st, ok := l["state"]; ok {
				key += "/" + st
			}
			out[key] = s.GetGauge().GetValue()
		}
	}
	return out
}

// A wave whose gate measures Kyverno legacy objects has their sum as a series (0 included);
// a wave without that gate has none, whatever its clusters hold.
func TestRolloutMetricsLegacyObjects(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewRollout(reg)
	two, zero := int64(2), int64(0)
	m.Set("kyverno-upgrade", &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{
		{Name: "canary", Phase: policyhubv1.WaveWaiting, LegacyObjects: &two},
		{Name: "eu", Phase: policyhubv1.WaveEnforcing, LegacyObjects: &zero},
		{Name: "rest", Phase: policyhubv1.WavePending},
	}})
	want := `
# HELP policyhub_rollout_wave_legacy_objects Kyverno legacy objects (owned or not) summed over a rollout wave's clusters, as the wave's gate (maxLegacyObjects) last measured them; only waves with that gate have the series.
# TYPE policyhub_rollout_wave_legacy_objects gauge
policyhub_rollout_wave_legacy_objects{policy="kyverno-upgrade",wave="canary"} 2
policyhub_rollout_wave_legacy_objects{policy="kyverno-upgrade",wave="eu"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_rollout_wave_legacy_objects"); err != nil {
		t.Error(err)
	}
}
