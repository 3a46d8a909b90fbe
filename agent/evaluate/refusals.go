package evaluate

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/agent/dryruns"
)

// RefusalMetric is the API server's counter of ValidatingAdmissionPolicy checks, by policy,
// binding, error type and enforcement action (BETA stability since Kubernetes 1.28); a refusal
// is a check whose enforcement_action is "deny".
const RefusalMetric = "apiserver_validating_admission_policy_check_total"

// Bounds of a read of the API server's /metrics: its exposition is large (tens of MiB in a busy
// cluster) and is read a line at a time, only RefusalMetric's lines kept.
const (
	maxMetricsBody   = 64 << 20
	metricsTimeout   = 10 * time.Second
	maxRefusalSeries = 10000
	apiServer        = "kube-apiserver" // the window's one endpoint
)

// refusals follows the API server's refusals per policy over a window (dryruns.Window: the
// counter is cumulative since the API server started; the window turns it into "refused in the
// last hour", counting from the agent's first read, resets taken as Prometheus' increase()
// does). Not safe for concurrent use.
type refusals struct {
	client rest.Interface
	window dryruns.Window
}

// refusalReading is what one read says.
type refusalReading struct {
	// Blocked counts each policy's refusals over the window.
	Blocked map[string]int64
	// Counted: the metric was read; NotCounted says why not.
	Counted    bool
	NotCounted string
}

// read GETs the API server's /metrics through the agent's own client (nonResourceURLs
// /metrics, get) and returns the refusals over the window ending at now.
func (r *refusals) read(ctx context.Context, now time.Time) refusalReading {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	body, err := r.client.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").Stream(ctx)
	if err != nil {
		why := fmt.Sprintf("the API server's /metrics unreadable: %v", err)
		if apierrors.IsForbidden(err) {
			why = "the agent may not GET the API server's /metrics (nonResourceURLs /metrics, get: the agent chart's apiServerMetrics.read)"
		}
		return refusalReading{NotCounted: why}
	}
	defer func() { _ = body.Close() }()
	limited := &io.LimitedReader{R: body, N: maxMetricsBody + 1}
	family, err := dryruns.ParseFamily(limited, RefusalMetric, maxRefusalSeries)
	if limited.N == 0 {
		return refusalReading{NotCounted: fmt.Sprintf("the API server's /metrics is larger than %d MiB", maxMetricsBody>>20)}
	}
	if err != nil {
		return refusalReading{NotCounted: fmt.Sprintf("the API server's /metrics: %v", err)}
	}
	denied, _ := denials(family)
	r.window.Observe(apiServer, now, denied)
	out := refusalReading{Counted: true, Blocked: map[string]int64{}}
	if r.window.Overflow {
		out.Counted, out.NotCounted = false, "more policies refused than the agent follows"
	}
	for k, n := range r.window.DryRuns(now) {
		out.Blocked[k.Name] = n
	}
	return out
}

// denials sums the deny checks of RefusalMetric per policy (over bindings and error types);
// series naming no valid policy or with a value that is not a count are skipped and counted.
func denials(family *dto.MetricFamily) (denied map[dryruns.Key]float64, invalid int) {
	denied = map[dryruns.Key]float64{}
	for _, m := range family.GetMetric() {
		var policy, action string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "policy":
				policy = l.GetValue()
			case "enforcement_action":
				action = l.GetValue()
			}
		}
		if action != "deny" {
			continue
		}
		v := m.GetCounter().GetValue()
		if m.GetCounter() == nil {
			v = m.GetUntyped().GetValue()
		}
		if len(validation.IsDNS1123Subdomain(policy)) > 0 || math.IsNaN(v) || v < 0 || v > 1<<53 {
			invalid++
			continue
		}
		denied[dryruns.Key{Name: policy}] += v
	}
	return denied, invalid
}
