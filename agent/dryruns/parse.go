package dryruns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MetricName is Kyverno's counter of rule results of its legacy policy engine, as its
// Prometheus exporter names it (Kyverno 1.19: the OTel counter kyverno_policy_results).
const MetricName = "kyverno_policy_results_total"

// Label names and the values Parse selects: the enforce-mode policy rules that failed at
// admission, which is a refusal.
const (
	labelDryRun        = "dry_run"
	labelCause         = "rule_execution_cause"
	labelResult        = "rule_result"
	labelMode          = "policy_validation_mode"
	labelPolicy        = "policy_name"
	labelNamespace     = "policy_namespace"
	labelRule          = "rule_name"
	causeAdmission     = "admission_request"
	resultFail         = "fail"
	modeEnforce        = "enforce"
	clusterPolicyScope = "-" // policy_namespace of a ClusterPolicy
)

// Limits of Parse.
const (
	// DefaultMaxSeries bounds the series of MetricName read from one exposition (Kyverno's
	// lines are about 450 bytes: some 4.5 MB).
	DefaultMaxSeries = 10000
	// maxLine bounds one line of the exposition.
	maxLine = 64 << 10
	// maxRuleName bounds a rule name (Kyverno's CRDs: 63).
	maxRuleName = 63
	// maxCount is the largest counter value taken as a count (float64 is exact up to 2^53).
	maxCount = 1 << 53
)

// Key names a legacy policy's rule: Namespace is empty for a ClusterPolicy.
type Key struct {
	Namespace, Name, Rule string
}

// Reading is what one exposition says of dry-run refusals.
type Reading struct {
	// DryRuns are the enforce-mode admission fail results of dry-run requests counted so far,
	// per policy rule, summed over the other labels (resource kind, namespace, operation).
	DryRuns map[Key]float64
	// Present: the exposition has MetricName.
	Present bool
	// Unlabelled counts admission fail series without the dry_run label (Kyverno's
	// metricsExposure can drop it): then dry-runs cannot be told apart.
	Unlabelled int
	// Invalid counts series skipped for a name or value that is not a policy's.
	Invalid int
}

// ErrTooManySeries says the exposition has more series of MetricName than allowed.
var ErrTooManySeries = errors.New("too many series")

// Parse reads a Prometheus text exposition (version 0.0.4) and keeps MetricName's dry-run
// refusals. Other metrics are skipped line by line, unparsed; a line longer than 64 KiB, more
// than maxSeries series of MetricName, or text the Prometheus parser refuses is an error.
// Series whose policy or rule name is not a valid one, or whose value is not a finite count,
// are skipped and counted in Invalid.
func Parse(r io.Reader, maxSeries int) (Reading, error) {
	family, err := ParseFamily(r, MetricName, maxSeries)
	if err != nil {
		return Reading{}, err
	}
	out := Reading{DryRuns: map[Key]float64{}}
	if family == nil {
		return out, nil
	}
	out.Present = true
	for _, m := range family.GetMetric() {
		add(&out, m)
	}
	return out, nil
}

// ParseFamily reads a Prometheus text exposition (version 0.0.4) and returns the family of
// the metric name (nil when absent), parsed by the Prometheus parser. Other metrics are
// skipped line by line, unparsed (an API server's exposition is tens of MiB); a line longer
// than 64 KiB, more than maxSeries series of the metric (0: DefaultMaxSeries), or text the
// parser refuses is an error.
func ParseFamily(r io.Reader, name string, maxSeries int) (*dto.MetricFamily, error) {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	series := 0
	for sc.Scan() {
		line := sc.Bytes()
		if !ours(line, name) {
			continue
		}
		if line[0] != '#' {
			series++
			if series > maxSeries {
				return nil, fmt.Errorf("%s: more than %d series: %w", name, maxSeries, ErrTooManySeries)
			}
		}
		kept.Write(line)
		kept.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the metrics: %w", err)
	}
	if kept.Len() == 0 {
		return nil, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(&kept)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return families[name], nil
}

// ours says whether an exposition line is of the metric name: a sample, or its HELP or TYPE line.
func ours(line []byte, name string) bool {
	rest, ok := bytes.CutPrefix(line, []byte("# HELP "))
	if !ok {
		rest, ok = bytes.CutPrefix(line, []byte("# TYPE "))
	}
	if !ok {
		rest = line
	}
	rest, ok = bytes.CutPrefix(rest, []byte(name))
	return ok && len(rest) > 0 && (rest[0] == '{' || rest[0] == ' ' || rest[0] == '\t')
}

// add counts one series of MetricName into r when it is a dry-run refusal.
func add(r *Reading, m *dto.Metric) {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels[labelCause] != causeAdmission || labels[labelResult] != resultFail || labels[labelMode] != modeEnforce {
		return
	}
	dryRun, labelled := labels[labelDryRun]
	if !labelled {
		r.Unlabelled++
		return
	}
	if dryRun != "true" {
		return
	}
	key, ok := keyOf(labels)
	v := m.GetCounter().GetValue()
	if m.GetCounter() == nil {
		v = m.GetUntyped().GetValue()
	}
	if !ok || math.IsNaN(v) || v < 0 || v > maxCount {
		r.Invalid++
		return
	}
	r.DryRuns[key] += v
}

// keyOf reads and validates a series' policy and rule.
func keyOf(labels map[string]string) (Key, bool) {
	k := Key{Namespace: labels[labelNamespace], Name: labels[labelPolicy], Rule: labels[labelRule]}
	if k.Namespace == clusterPolicyScope {
		k.Namespace = ""
	} else if len(validation.IsDNS1123Label(k.Namespace)) > 0 {
		return Key{}, false
	}
	if len(validation.IsDNS1123Subdomain(k.Name)) > 0 {
		return Key{}, false
	}
	if k.Rule == "" || len(k.Rule) > maxRuleName || !utf8.ValidString(k.Rule) || strings.ContainsFunc(k.Rule, isControl) {
		return Key{}, false
	}
	return k, true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
