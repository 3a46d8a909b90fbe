package collect

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// DigestReport reduces a PolicyReport, ClusterPolicyReport, openreports Report or ClusterReport
// (their results have the same shape) to Digests: one for the report's scope, or one per
// resource when the results name their resources instead (older report producers).
func DigestReport(report *unstructured.Unstructured) []*Digest {
	name := report.GetAPIVersion() + " " + report.GetKind() + " " + report.GetNamespace() + "/" + report.GetName()
	scope := resourceFrom(report.Object["scope"])
	results, _, _ := unstructured.NestedSlice(report.Object, "results")
	byResource := map[Resource]*Digest{}
	var order []Resource
	digestFor := func(r Resource) *Digest {
		d, ok := byResource[r]
		if !ok {
			d = &Digest{Report: name, Resource: r}
			byResource[r] = d
			order = append(order, r)
		}
		return d
	}
	for _, item := range results {
		res, ok := item.(map[string]any)
		if !ok {
			continue
		}
		resources := []Resource{scope}
		if list, ok := res["resources"].([]any); ok && len(list) > 0 && scope == (Resource{}) {
			resources = resources[:0]
			for _, r := range list {
				resources = append(resources, resourceFrom(r))
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

func addResult(d *Digest, res map[string]any) {
	key := policyKey(str(res, "policy"), str(res, "source"))
	severity, category := shared(str(res, "severity")), shared(str(res, "category"))
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
	pc.Saw(timestamp(res["timestamp"]))
	result := str(res, "result")
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
	if result == "fail" || result == "error" {
		d.Violations = append(d.Violations, Violation{
			Policy: key, Rule: shared(str(res, "rule")), Result: shared(result), Severity: severity, Category: category,
			Message: Cut(str(res, "message"), MaxMessage), Time: timestamp(res["timestamp"]),
		})
	}
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

func resourceFrom(v any) Resource {
	m, ok := v.(map[string]any)
	if !ok {
		return Resource{}
	}
	return Resource{
		APIVersion: shared(str(m, "apiVersion")), Kind: shared(str(m, "kind")), Namespace: shared(str(m, "namespace")),
		Name: str(m, "name"), UID: types.UID(str(m, "uid")),
	}
}

func timestamp(v any) time.Time {
	m, ok := v.(map[string]any)
	if !ok {
		return time.Time{}
	}
	seconds, _ := m["seconds"].(int64)
	if f, ok := m["seconds"].(float64); ok {
		seconds = int64(f)
	}
	if seconds == 0 {
		return time.Time{}
	}
	return time.Unix(seconds, 0).UTC()
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
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
