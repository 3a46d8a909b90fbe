package collect

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// A per-resource report as Kyverno's reports controller writes it (scope set, results[].resources empty).
const kyvernoReport = `
apiVersion: wgpolicyk8s.io/v1alpha2
kind: PolicyReport
metadata: {name: 6a1b, namespace: shop}
scope: {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web, uid: 6a1b}
results:
- {policy: require-labels, rule: check-team, result: fail, severity: medium, category: Best Practices, source: kyverno, message: "validation error: label team is required", timestamp: {seconds: 1795000050, nanos: 0}}
- {policy: require-labels, rule: check-owner, result: pass, source: kyverno, timestamp: {seconds: 1795000000, nanos: 0}}
- {policy: shop/limits, rule: check-limits, result: error, source: kyverno, message: boom, timestamp: {seconds: 1795000100, nanos: 0}}
- {policy: no-latest, result: warn, source: KyvernoValidatingPolicy, timestamp: {seconds: 1795000000, nanos: 0}}
- {policy: no-latest, result: skip, source: KyvernoValidatingPolicy, timestamp: {seconds: 1795000000, nanos: 0}}
`

// An older aggregated report: no scope, each result names its resources.
const aggregatedReport = `
apiVersion: wgpolicyk8s.io/v1alpha2
kind: ClusterPolicyReport
metadata: {name: cpol-require-labels}
results:
- policy: require-labels
  result: fail
  source: kyverno
  resources:
  - {apiVersion: v1, kind: Namespace, name: a, uid: ua}
  - {apiVersion: v1, kind: Namespace, name: b, uid: ub}
`

// typedReport decodes a report's YAML into obj, openreports' type, as the collector's clients do.
func typedReport(t *testing.T, gvr schema.GroupVersionResource, manifest string, obj runtime.Object) Report {
	t.Helper()
	if err := yaml.Unmarshal([]byte(manifest), obj); err != nil {
		t.Fatal(err)
	}
	report, _, ok := reportOf(gvr, obj)
	if !ok {
		t.Fatalf("%T is not a report", obj)
	}
	return report
}

func TestDigestReport(t *testing.T) {
	digests := DigestReport(typedReport(t, ReportKinds[0], kyvernoReport, &openreportsv1alpha1.Report{}))
	if len(digests) != 1 {
		t.Fatalf("%d digests, want 1", len(digests))
	}
	d := digests[0]
	if d.Resource != (Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "6a1b"}) {
		t.Errorf("resource %+v", d.Resource)
	}
	type policyCounts struct {
		policy             PolicyKey
		severity, category string
		counts             Counts
		oldest             time.Time
	}
	want := []policyCounts{
		// Oldest: the oldest of the policy's results, not the first.
		{PolicyKey{Kind: "ClusterPolicy", Name: "require-labels"}, "medium", "Best Practices", Counts{Pass: 1, Fail: 1}, time.Unix(1795000000, 0).UTC()},
		{PolicyKey{Kind: "Policy", Namespace: "shop", Name: "limits"}, "", "", Counts{Error: 1}, time.Unix(1795000100, 0).UTC()},
		{PolicyKey{Kind: "ValidatingPolicy", Name: "no-latest"}, "", "", Counts{Warn: 1, Skip: 1}, time.Unix(1795000000, 0).UTC()},
	}
	if len(d.Policies) != len(want) {
		t.Fatalf("%d policies, want %d", len(d.Policies), len(want))
	}
	for i := range want {
		pc := &d.Policies[i]
		if got := (policyCounts{pc.Policy(), pc.Severity(), pc.Category(), pc.Counts, pc.Oldest()}); got != want[i] {
			t.Errorf("policy %d: %+v, want %+v", i, got, want[i])
		}
	}
	if len(d.Violations) != 2 || d.Violations[0].Rule != "check-team" || d.Violations[1].Result != "error" {
		t.Fatalf("violations %+v", d.Violations)
	}
	if got := d.Violations[1].Time; !got.Equal(time.Unix(1795000100, 0)) {
		t.Errorf("violation time %v", got)
	}

	digests = DigestReport(typedReport(t, ReportKinds[1], aggregatedReport, &openreportsv1alpha1.ClusterReport{}))
	if len(digests) != 2 || digests[0].Resource.UID != "ua" || digests[1].Resource.UID != "ub" || digests[1].Policies[0].Counts.Fail != 1 {
		t.Errorf("aggregated report not split per resource: %+v", digests)
	}
}

func TestDigestEvent(t *testing.T) {
	blocked := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "require-labels.1", Namespace: "default"},
		Reason:         "PolicyViolation",
		Action:         "Resource Blocked",
		InvolvedObject: corev1.ObjectReference{Kind: "ClusterPolicy", Name: "require-labels"},
		Related:        &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Message:        "Deployment shop/web: [check-team] fail (blocked); validation error: label team is required",
		EventTime:      metav1.MicroTime{Time: time.Unix(1795000000, 0)},
	}
	b := DigestEvent(blocked)
	if b == nil {
		t.Fatal("a blocked admission was not recognised")
	}
	if b.Policy != (PolicyKey{Kind: "ClusterPolicy", Name: "require-labels"}) || b.Rule != "check-team" || b.Count != 1 || b.Resource.Name != "web" || !b.Time.Equal(time.Unix(1795000000, 0)) {
		t.Errorf("block %+v", b)
	}
	passed := blocked.DeepCopy()
	passed.Action, passed.Message = "Resource Passed", "Deployment shop/web: [check-team] fail; validation error"
	if DigestEvent(passed) != nil {
		t.Error("an audit violation (not blocked) was counted as a block")
	}
}

func TestCut(t *testing.T) {
	s := strings.Repeat("a", 508) + "ééé"
	got := Cut(s, 512)
	if len(got) > 512 || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, strings.Repeat("a", 508)) {
		t.Errorf("cut %q (%d bytes)", got[500:], len(got))
	}
	if Cut("short", 512) != "short" {
		t.Error("short strings are kept")
	}
}

// A report as Kyverno 1.19 writes it when PolicyExceptions exempt a resource: the results they
// exempted are skip (or pass, with reportResult: pass) and name the exceptions in a property.
const exemptedReport = `
apiVersion: wgpolicyk8s.io/v1alpha2
kind: PolicyReport
metadata: {name: 7c2d, namespace: shop}
scope: {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: legacy, uid: 7c2d}
results:
- {policy: require-labels, rule: check-team, result: skip, source: kyverno, message: "rule is skipped due to policy exceptions", properties: {exceptions: "fpex-shop-legacy-0123456789,local-exception"}}
- {policy: no-latest, rule: exception, result: pass, source: KyvernoValidatingPolicy, properties: {exceptions: fpex-shop-legacy-0123456789}}
- {policy: disallow-host-path, rule: check, result: skip, source: kyverno, message: "preconditions not met"}
`

func TestDigestReportCountsExceptions(t *testing.T) {
	digests := DigestReport(typedReport(t, ReportKinds[0], exemptedReport, &openreportsv1alpha1.Report{}))
	if len(digests) != 1 {
		t.Fatalf("%d digests, want 1", len(digests))
	}
	want := []ExceptionCount{{Name: "fpex-shop-legacy-0123456789", Results: 2}, {Name: "local-exception", Results: 1}}
	if got := digests[0].Exceptions; !slices.Equal(got, want) {
		t.Errorf("exceptions %+v, want %+v", got, want)
	}
	// The results are still counted as what Kyverno says they are.
	if got := digests[0].Policies[0].Counts; got != (Counts{Skip: 1}) {
		t.Errorf("require-labels counts %+v, want one skip", got)
	}

	// Most resources: no exempted result, no exceptions slice.
	digests = DigestReport(typedReport(t, ReportKinds[0], kyvernoReport, &openreportsv1alpha1.Report{}))
	if digests[0].Exceptions != nil {
		t.Errorf("exceptions %+v in a report without exempted results, want nil", digests[0].Exceptions)
	}
}

func TestDigestExceptions(t *testing.T) {
	result := func(r, exceptions string) openreportsv1alpha1.ReportResult {
		res := openreportsv1alpha1.ReportResult{Policy: "require-labels", Rule: "check", Source: "kyverno", Result: openreportsv1alpha1.Result(r)}
		if exceptions != "-" {
			res.Properties = map[string]string{"exceptions": exceptions, "other": "x"}
		}
		return res
	}
	long := strings.Repeat("e", 300)
	var nine []string
	for i := range 9 {
		nine = append(nine, fmt.Sprintf("ex-%d", i))
	}
	tests := []struct {
		name    string
		results []openreportsv1alpha1.ReportResult
		want    []ExceptionCount
	}{
		{"a skip result counts one for each exception it names", []openreportsv1alpha1.ReportResult{result("skip", "a,b")},
			[]ExceptionCount{{Name: "a", Results: 1}, {Name: "b", Results: 1}}},
		{"a pass result (reportResult: pass) counts", []openreportsv1alpha1.ReportResult{result("pass", "a")},
			[]ExceptionCount{{Name: "a", Results: 1}}},
		{"fail, error and warn results count nothing", []openreportsv1alpha1.ReportResult{result("fail", "a"), result("error", "a"), result("warn", "a")}, nil},
		{"no property counts nothing", []openreportsv1alpha1.ReportResult{result("skip", "-")}, nil},
		{"a blank property counts nothing", []openreportsv1alpha1.ReportResult{result("skip", ""), result("skip", " , ,,")}, nil},
		{"names are trimmed, blanks skipped", []openreportsv1alpha1.ReportResult{result("skip", " a , ,b ")},
			[]ExceptionCount{{Name: "a", Results: 1}, {Name: "b", Results: 1}}},
		{"results add up per exception", []openreportsv1alpha1.ReportResult{result("skip", "a,b"), result("pass", "b"), result("fail", "b"), result("skip", "c")},
			[]ExceptionCount{{Name: "a", Results: 1}, {Name: "b", Results: 2}, {Name: "c", Results: 1}}},
		{"a name named twice in one result counts once", []openreportsv1alpha1.ReportResult{result("skip", "a,a, a")},
			[]ExceptionCount{{Name: "a", Results: 1}}},
		{"a long name is cut to 253 bytes", []openreportsv1alpha1.ReportResult{result("skip", long)},
			[]ExceptionCount{{Name: long[:253], Results: 1}}},
		{"two names equal once cut are one", []openreportsv1alpha1.ReportResult{result("skip", long+","+long+"x")},
			[]ExceptionCount{{Name: long[:253], Results: 1}}},
		{"at most 8 exceptions per result", []openreportsv1alpha1.ReportResult{result("skip", strings.Join(nine, ","))},
			[]ExceptionCount{{Name: "ex-0", Results: 1}, {Name: "ex-1", Results: 1}, {Name: "ex-2", Results: 1}, {Name: "ex-3", Results: 1},
				{Name: "ex-4", Results: 1}, {Name: "ex-5", Results: 1}, {Name: "ex-6", Results: 1}, {Name: "ex-7", Results: 1}}},
		{"invalid UTF-8 is dropped from a name", []openreportsv1alpha1.ReportResult{result("skip", "a\xff,\xff\xfe")},
			[]ExceptionCount{{Name: "a", Results: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web", UID: "u"}
			digests := DigestReport(Report{ID: "r", Scope: scope, Results: tt.results})
			if len(digests) != 1 {
				t.Fatalf("%d digests, want 1", len(digests))
			}
			if got := digests[0].Exceptions; !slices.Equal(got, tt.want) {
				t.Errorf("exceptions %+v, want %+v", got, tt.want)
			}
		})
	}
}
