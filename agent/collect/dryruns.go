package collect

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/dryruns"
	"github.com/policyhub/policyhub/agent/engine"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// maxAdmissionPods bounds the admission controller Pods listed.
const maxAdmissionPods = 50

// countDryRuns reads Kyverno's admission controller metrics and puts into s the dry-runs among
// its refusals, and whether they could be counted (s.Engine.Kyverno), when Kyverno is there.
// It is a read of the cluster's own Kyverno, only when a summary is built; c.mu is not held.
func (c *Collector) countDryRuns(s *Snapshot) {
	k := s.Engine.Kyverno
	if k == nil {
		return // no Kyverno found: nothing refuses
	}
	c.mu.Lock()
	ctx := c.ctx
	c.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	urls, err := c.metricsURLs(ctx)
	var res dryruns.Result
	if err != nil {
		res.NotCounted = err.Error()
	} else {
		res = c.dryRuns.Count(ctx, urls, c.now())
	}
	if res.Counted && !res.Present && refusesLegacy(s.Blocks) {
		res.Counted, res.NotCounted = false, "Kyverno refused admissions, but its metrics have no "+dryruns.MetricName+" (disabled by its metricsExposure?)"
	}
	counted := res.Counted
	k.DryRunsCounted = &counted
	k.DryRunsNotCounted = policyhubv1.CutUTF8(res.NotCounted, policyhubv1.MaxDryRunsNotCountedLength)
	for key, n := range res.DryRuns {
		if s.DryRuns == nil {
			s.DryRuns = map[PolicyKey]int64{}
		}
		s.DryRuns[legacyPolicy(key)] = n
	}
}

// metricsURLs are the endpoints to read: the configured ones, else the admission controller
// Pods' in Kyverno's namespace.
func (c *Collector) metricsURLs(ctx context.Context) ([]string, error) {
	if len(c.opts.KyvernoMetricsURLs) > 0 {
		return c.opts.KyvernoMetricsURLs, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dryruns.ScrapeTimeout)
	defer cancel()
	pods, err := c.clientset.CoreV1().Pods(c.opts.KyvernoNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: engine.LabelComponent + "=" + engine.ComponentAdmission, Limit: maxAdmissionPods,
	})
	if err != nil {
		return nil, fmt.Errorf("list Kyverno's admission controller Pods: %w", err)
	}
	return dryruns.PodURLs(pods.Items), nil
}

// legacyPolicy is the collector's key of a policy the metric names: a ClusterPolicy when
// cluster-scoped ("-"), else a Policy.
func legacyPolicy(k dryruns.Key) PolicyKey {
	if k.Namespace == "" {
		return PolicyKey{Kind: "ClusterPolicy", Name: k.Name}
	}
	return PolicyKey{Kind: "Policy", Namespace: k.Namespace, Name: k.Name}
}

// refusesLegacy says whether some block is of a legacy policy, whose dry-runs the metric counts.
func refusesLegacy(blocks []*Block) bool {
	for _, b := range blocks {
		if b != nil && (b.Policy.Kind == "ClusterPolicy" || b.Policy.Kind == "Policy") {
			return true
		}
	}
	return false
}
