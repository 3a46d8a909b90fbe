package collect

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unique"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Report is one policy report as the collector reads it: its id ("<api> <kind> <namespace>/<name>"),
// its scope and its results, in openreports' types (see reports.go: every report API decodes
// into them).
type Report struct {
	ID      string
	Scope   *corev1.ObjectReference
	Results []openreportsv1alpha1.ReportResult
}

// reportOf reads a typed report the informers hold; gvr is the API it was read from.
func reportOf(gvr schema.GroupVersionResource, obj any) (Report, metav1.ObjectMeta, bool) {
	id := func(m metav1.ObjectMeta) string {
		return gvr.GroupVersion().String() + " " + reportKinds[gvr] + " " + m.Namespace + "/" + m.Name
	}
	switch r := obj.(type) {
	case *openreportsv1alpha1.Report:
		return Report{ID: id(r.ObjectMeta), Scope: r.Scope, Results: r.Results}, r.ObjectMeta, true
	case *openreportsv1alpha1.ClusterReport:
		return Report{ID: id(r.ObjectMeta), Scope: r.Scope, Results: r.Results}, r.ObjectMeta, true
	}
	return Report{}, metav1.ObjectMeta{}, false
}

// DigestReport reduces a PolicyReport, ClusterPolicyReport, openreports Report or ClusterReport
// to Digests: one for the report's scope, or one per resource when the results name their
// resources instead (older report producers).
func DigestReport(report Report) []*Digest {
	scope := resourceFrom(report.Scope)
	byResource := map[Resource]*Digest{}
	var order []Resource
	digestFor := func(r Resource) *Digest {
		d, ok := byResource[r]
		if !ok {
			d = &Digest{Report: report.ID, Resource: r}
			byResource[r] = d
			order = append(order, r)
		}
		return d
	}
	for i := range report.Results {
		res := &report.Results[i]
		resources := []Resource{scope}
		if len(res.Subjects) > 0 && scope == (Resource{}) {
			resources = resources[:0]
			for j := range res.Subjects {
				resources = append(resources, resourceFrom(&res.Subjects[j]))
			}
		}
		for _, r := range resources {
			addResult(digestFor(r), res)
		}
	}
	out := make([]*Digest, 0, len(order))
	for _, r := range order {
		d := byResource[r]
		// Kept for as long as the report lives: no spare capacity from append's growth.
		d.Policies = slices.Clone(d.Policies)
		d.Exceptions = slices.Clone(d.Exceptions) // nil stays nil
		out = append(out, d)
	}
	return out
}

// shared returns the one copy of s that every digest holds. A cluster's reports repeat a few
// policy names, rules, severities, categories, kinds and namespaces in every one of their
// results; each decoded result held its own copies, a fifth of the agent's live heap at 100,000
// results (make bench-agent). Names and UIDs of resources are unique and not shared.
func shared(s string) string {
	return unique.Make(s).Value()
}

func addResult(d *Digest, res *openreportsv1alpha1.ReportResult) {
	key := policyKey(res.Policy, res.Source)
	severity, category := shared(string(res.Severity)), shared(res.Category)
	handle := unique.Make(key)
	var pc *PolicyCounts
	for i := range d.Policies {
		if d.Policies[i].policy == handle {
			pc = &d.Policies[i]
			break
		}
	}
	if pc == nil {
		d.Policies = append(d.Policies, NewPolicyCounts(key, severity, category, Counts{}))
		pc = &d.Policies[len(d.Policies)-1]
	}
	pc.Saw(timestamp(res.Timestamp))
	result := string(res.Result)
	switch result {
	case "pass":
		pc.Counts.Pass++
	case "fail":
		pc.Counts.Fail++
	case "warn":
		pc.Counts.Warn++
	case "error":
		pc.Counts.Error++
	case "skip":
		pc.Counts.Skip++
	}
	// A shadow's results are a preview, compared per resource by their counts alone: its
	// violations and the exceptions it honoured are never compliance, and are not kept.
	if policyhubv1.IsShadowName(key.Name) {
		return
	}
	if result == "fail" || result == "error" {
		d.Violations = append(d.Violations, Violation{
			Policy: key, Rule: shared(res.Rule), Result: shared(result), Severity: severity, Category: category,
			Message: Cut(res.Description, MaxMessage), Time: timestamp(res.Timestamp),
		})
	}
	if result == "skip" || result == "pass" {
		if names := res.Properties[propertyExceptions]; names != "" {
			addExceptions(d, names)
		}
	}
}

// propertyExceptions is the result property in which Kyverno (1.19) names, comma-joined and
// without their namespace, the PolicyExceptions that exempted the result: it reports the result
// as skip, or as pass when the exception says reportResult: pass.
const propertyExceptions = "exceptions"

// addExceptions counts one exempted result for each exception names lists: trimmed, blanks
// skipped, each name cut to MaxExceptionName bytes and counted once, and at most
// MaxExceptionsPerResult names.
func addExceptions(d *Digest, names string) {
	var counted [MaxExceptionsPerResult]string
	n := 0
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		if !utf8.ValidString(name) {
			name = strings.ToValidUTF8(name, "")
		}
		name = policyhubv1.CutUTF8(name, MaxExceptionName)
		if name == "" || slices.Contains(counted[:n], name) {
			continue
		}
		if n == len(counted) {
			return
		}
		counted[n] = name
		n++
		d.countException(name)
	}
}

// countException counts one exempted result for the exception name.
func (d *Digest) countException(name string) {
	for i := range d.Exceptions {
		if d.Exceptions[i].Name == name {
			d.Exceptions[i].Results++
			return
		}
	}
	d.Exceptions = append(d.Exceptions, ExceptionCount{Name: shared(name), Results: 1})
}

// policyKey reads a result's policy: "name" for cluster-scoped policies, "namespace/name" for
// namespaced ones (Kyverno's convention). The kind is known only for the CEL policy sources; for
// "kyverno" results it is ClusterPolicy or Policy by the same convention.
func policyKey(policy, source string) PolicyKey {
	k := PolicyKey{Name: shared(policy)}
	if ns, name, ok := strings.Cut(policy, "/"); ok {
		k.Namespace, k.Name = shared(ns), shared(name)
	}
	switch source {
	case "kyverno":
		k.Kind = "ClusterPolicy"
		if k.Namespace != "" {
			k.Kind = "Policy"
		}
	case "KyvernoValidatingPolicy":
		k.Kind = "ValidatingPolicy"
		if k.Namespace != "" {
			k.Kind = "NamespacedValidatingPolicy"
		}
	case "KyvernoImageValidatingPolicy":
		k.Kind = "ImageValidatingPolicy"
		if k.Namespace != "" {
			k.Kind = "NamespacedImageValidatingPolicy"
		}
	}
	return k
}

// DigestEvent reads a Kyverno policy-violation Event: a Block when it records a refused
// admission (regarding the policy, related to the resource), nil otherwise.
func DigestEvent(ev *corev1.Event) *Block {
	if ev.Reason != "PolicyViolation" || !(ev.Action == "Resource Blocked" || strings.Contains(ev.Message, "(blocked)")) {
		return nil
	}
	b := &Block{
		Policy:  PolicyKey{Kind: ev.InvolvedObject.Kind, Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name},
		Message: Cut(ev.Message, MaxMessage),
		Count:   1,
	}
	if ev.Series != nil && ev.Series.Count > 1 {
		b.Count = ev.Series.Count
	} else if ev.Count > 1 {
		b.Count = ev.Count
	}
	if ev.Related != nil {
		b.Resource = Resource{APIVersion: ev.Related.APIVersion, Kind: ev.Related.Kind, Namespace: ev.Related.Namespace, Name: ev.Related.Name, UID: ev.Related.UID}
	}
	// "<Kind> <ns>/<name>: [<rule>] fail (blocked); <message>"
	if _, rest, ok := strings.Cut(ev.Message, ": ["); ok {
		if rule, _, ok := strings.Cut(rest, "]"); ok {
			b.Rule = rule
		}
	}
	switch {
	case !ev.EventTime.IsZero():
		b.Time = ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		b.Time = ev.LastTimestamp.Time
	default:
		b.Time = ev.CreationTimestamp.Time
	}
	return b
}

func resourceFrom(ref *corev1.ObjectReference) Resource {
	if ref == nil {
		return Resource{}
	}
	return Resource{
		APIVersion: shared(ref.APIVersion), Kind: shared(ref.Kind), Namespace: shared(ref.Namespace),
		Name: ref.Name, UID: ref.UID,
	}
}

// timestamp is a result's time, in seconds as reports give it (zero when none).
func timestamp(t metav1.Timestamp) time.Time {
	if t.Seconds == 0 {
		return time.Time{}
	}
	return time.Unix(t.Seconds, 0).UTC()
}

// Cut shortens s to at most n bytes without splitting a UTF-8 character, marking the cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	s = s[:n-len(mark)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}
