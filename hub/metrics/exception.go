package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Exceptions exposes the FleetPolicyExceptions, from their spec and status: when each ends,
// whether it is in force, and how many results it exempted, per exception (namespace and name,
// with the policy it exempts from); and the active exceptions per policy. Like Rollout it is a
// collector over the latest state of each exception: Set replaces an exception's series at once,
// Delete removes them. Labels are bounded by the number of exceptions; none names a cluster or a
// resource.
type Exceptions struct {
	mu         sync.Mutex
	exceptions map[exceptionKey]exceptionState

	expiry, active, exempted, byPolicy *prometheus.Desc
}

type exceptionKey struct{ namespace, name string }

// exceptionState is what the metrics show of an exception.
type exceptionState struct {
	policy   string
	expiry   float64 // unix seconds of spec.expiresAt
	active   bool
	exempted int64
}

// NewExceptions creates the exception metrics and registers them with reg.
func NewExceptions(reg prometheus.Registerer) *Exceptions {
	m := &Exceptions{
		exceptions: map[exceptionKey]exceptionState{},
		expiry: prometheus.NewDesc("policyhub_exception_expiry_timestamp_seconds",
			"Unix time a FleetPolicyException ends (spec.expiresAt): the hub removes it from every cluster then.",
			[]string{"namespace", "name", "policy"}, nil),
		active: prometheus.NewDesc("policyhub_exception_active",
			"1 while a FleetPolicyException is approved and not ended (state Active), 0 otherwise.",
			[]string{"namespace", "name", "policy"}, nil),
		exempted: prometheus.NewDesc("policyhub_exception_exempted_results",
			"Report results a FleetPolicyException turned into skip, summed over the clusters it is in, as their agents last reported.",
			[]string{"namespace", "name", "policy"}, nil),
		byPolicy: prometheus.NewDesc("policyhub_exceptions_active",
			"Active FleetPolicyExceptions exempting from a policy (kind/name or kind/namespace/name).",
			[]string{"policy"}, nil),
	}
	reg.MustRegister(m)
	return m
}

// Set records an exception's end, state and exempted results, replacing its series. policy is
// the policy it exempts from ("" while unknown: not Active, or its target missing).
func (m *Exceptions) Set(ex *policyhubv1.FleetPolicyException) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.exceptions[exceptionKey{ex.Namespace, ex.Name}] = exceptionState{
		policy:   ex.Status.Policy,
		expiry:   float64(ex.Spec.ExpiresAt.Unix()),
		active:   ex.Status.State == policyhubv1.ExceptionActive,
		exempted: ex.Status.Exempted,
	}
}

// Delete removes an exception's series.
func (m *Exceptions) Delete(namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.exceptions, exceptionKey{namespace, name})
}

// Describe implements prometheus.Collector.
func (m *Exceptions) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.expiry
	ch <- m.active
	ch <- m.exempted
	ch <- m.byPolicy
}

// Collect implements prometheus.Collector.
func (m *Exceptions) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	perPolicy := map[string]int{}
	for k, e := range m.exceptions {
		ch <- prometheus.MustNewConstMetric(m.expiry, prometheus.GaugeValue, e.expiry, k.namespace, k.name, e.policy)
		ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, boolValue(e.active), k.namespace, k.name, e.policy)
		ch <- prometheus.MustNewConstMetric(m.exempted, prometheus.GaugeValue, float64(e.exempted), k.namespace, k.name, e.policy)
		if e.active && e.policy != "" {
			perPolicy[e.policy]++
		}
	}
	for policy, n := range perPolicy {
		ch <- prometheus.MustNewConstMetric(m.byPolicy, prometheus.GaugeValue, float64(n), policy)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
