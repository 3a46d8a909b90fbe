package summarize

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// randomSnapshot is a small cluster with many ties (shared times, severities, rules and messages),
// so that only a total order makes the summary independent of the input's order.
func randomSnapshot(seed uint64, resources int) collect.Snapshot {
	r := rand.New(rand.NewPCG(seed, seed))
	keys := []collect.PolicyKey{
		{Kind: "ClusterPolicy", Name: "require-labels"},
		{Name: "require-labels"}, // as wgpolicyk8s.io results spell it
		{Kind: "ClusterPolicy", Name: "disallow-latest"},
		{Kind: "ValidatingPolicy", Name: "disallow-latest"},
		{Name: "disallow-latest"}, // ambiguous
		{Kind: "Policy", Namespace: "ns-0", Name: "limits"},
		{Namespace: "ns-1", Name: "limits"},
		{Name: "host-path"},
		{Kind: "ClusterPolicy", Name: "run-as-non-root"},
		{Kind: "ClusterPolicy", Name: "p-9"},
		{Kind: "ClusterPolicy", Name: "p-10"},
		{Kind: "ClusterPolicy", Name: "p-11"},
	}
	severities := []string{"", "low", "medium", "high", "critical", "info"}
	categories := []string{"", "Pod Security", "Best Practices"}
	messages := []string{"", "missing label", strings.Repeat("long message é ", 60)}
	s := collect.Snapshot{
		Policies: map[collect.PolicyKey]collect.PolicyInfo{
			keys[0]: {Title: "Require labels", Category: "Best Practices", Severity: "medium"},
			keys[2]: {Severity: "high"},
			keys[3]: {Title: "Disallow latest (CEL)"},
			keys[5]: {Category: "Multi-Tenancy"},
			keys[8]: {Title: "Run as non-root", Severity: "critical"},
		},
		Applications: map[types.UID]string{},
		Engine:       policyhubv1.EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2", "openreports.io/v1alpha1"}, KyvernoWebhooks: true},
	}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	for i := range resources {
		res := collect.Resource{APIVersion: "v1", Kind: "Pod", Namespace: fmt.Sprintf("ns-%d", i%4), Name: fmt.Sprintf("pod-%d", i%50)}
		if i%7 != 0 {
			res.UID = types.UID(fmt.Sprintf("uid-%d", i))
		}
		if i%3 != 0 && res.UID != "" {
			s.Applications[res.UID] = fmt.Sprintf("app-%d", i%6)
		}
		d := &collect.Digest{Report: fmt.Sprintf("wgpolicyk8s.io/v1alpha2 PolicyReport %s/%d", res.Namespace, i), Resource: res}
		for _, k := range keys {
			if r.IntN(3) == 0 {
				continue
			}
			d.Policies = append(d.Policies, collect.NewPolicyCounts(k, pick(severities), pick(categories),
				collect.Counts{Pass: r.Int32N(3), Fail: r.Int32N(2), Warn: r.Int32N(2), Error: r.Int32N(2), Skip: r.Int32N(2)}))
		}
		for range r.IntN(4) {
			d.Violations = append(d.Violations, collect.Violation{
				Policy: keys[r.IntN(len(keys))], Rule: fmt.Sprintf("rule-%d", r.IntN(2)),
				Result: []string{"fail", "error", "fail"}[r.IntN(3)], Severity: pick(severities), Category: pick(categories),
				Message: pick(messages), Time: t0.Add(time.Duration(r.IntN(3)) * time.Hour),
			})
		}
		if len(d.Violations) > 0 && i%2 == 0 {
			// Twins: equal but for the message, or for the sub-second part of the time.
			twin := d.Violations[0]
			twin.Message += " (twin)"
			d.Violations = append(d.Violations, twin)
			twin.Time = twin.Time.Add(time.Millisecond)
			d.Violations = append(d.Violations, twin)
		}
		// Exceptions: many ties (counts 1 to 3 over 23 names), not drawn from r, so that the
		// rest of the snapshot is what it was before exceptions were summarized.
		if i%3 == 1 {
			for j := range i%4 + 1 {
				d.Exceptions = append(d.Exceptions, collect.ExceptionCount{Name: fmt.Sprintf("fpex-%02d", (i+7*j)%23), Results: int32(1 + (i+j)%3)})
			}
		}
		s.Digests = append(s.Digests, d)
		if i%5 == 0 {
			s.Blocks = append(s.Blocks, &collect.Block{Policy: keys[r.IntN(len(keys))], Rule: "r", Resource: res, Count: r.Int32N(3), Time: t0})
		}
	}
	return s
}

// shuffled is a deep copy of s with every slice in another order and the maps built anew.
func shuffled(s collect.Snapshot, r *rand.Rand) collect.Snapshot {
	out := collect.Snapshot{
		Policies:     map[collect.PolicyKey]collect.PolicyInfo{},
		Applications: map[types.UID]string{},
		Engine:       policyhubv1.EngineInfo{ReportAPIs: slices.Clone(s.Engine.ReportAPIs), KyvernoWebhooks: s.Engine.KyvernoWebhooks},
	}
	for _, d := range s.Digests {
		c := *d
		c.Policies = slices.Clone(d.Policies)
		c.Violations = slices.Clone(d.Violations)
		c.Exceptions = slices.Clone(d.Exceptions)
		r.Shuffle(len(c.Exceptions), func(i, j int) { c.Exceptions[i], c.Exceptions[j] = c.Exceptions[j], c.Exceptions[i] })
		r.Shuffle(len(c.Policies), func(i, j int) { c.Policies[i], c.Policies[j] = c.Policies[j], c.Policies[i] })
		r.Shuffle(len(c.Violations), func(i, j int) { c.Violations[i], c.Violations[j] = c.Violations[j], c.Violations[i] })
		out.Digests = append(out.Digests, &c)
	}
	for _, b := range s.Blocks {
		c := *b
		out.Blocks = append(out.Blocks, &c)
	}
	r.Shuffle(len(out.Digests), func(i, j int) { out.Digests[i], out.Digests[j] = out.Digests[j], out.Digests[i] })
	r.Shuffle(len(out.Blocks), func(i, j int) { out.Blocks[i], out.Blocks[j] = out.Blocks[j], out.Blocks[i] })
	apis := out.Engine.ReportAPIs
	r.Shuffle(len(apis), func(i, j int) { apis[i], apis[j] = apis[j], apis[i] })
	pk := slices.Collect(maps.Keys(s.Policies))
	r.Shuffle(len(pk), func(i, j int) { pk[i], pk[j] = pk[j], pk[i] })
	for _, k := range pk {
		out.Policies[k] = s.Policies[k]
	}
	if s.Shadows != nil {
		out.Shadows = map[collect.PolicyKey]collect.ShadowInfo{}
		sk := slices.Collect(maps.Keys(s.Shadows))
		r.Shuffle(len(sk), func(i, j int) { sk[i], sk[j] = sk[j], sk[i] })
		for _, k := range sk {
			out.Shadows[k] = s.Shadows[k]
		}
	}
	uids := slices.Collect(maps.Keys(s.Applications))
	r.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
	for _, u := range uids {
		out.Applications[u] = s.Applications[u]
	}
	return out
}

func TestDeterministic(t *testing.T) {
	for _, tt := range []struct {
		name      string
		resources int
		opts      Options
		wantCut   bool
	}{
		{"defaults", 400, Options{Cluster: "east-1"}, true}, // more than 50 violations
		{"count limits", 400, Options{Cluster: "east-1", MaxViolations: 5, MaxPolicies: 4, MaxApplications: 7, MaxExceptions: 6}, true},
		{"byte limit", 400, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: 6000}, true},
		{"no limit reached", 80, Options{Cluster: "east-1", MaxViolations: 200}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := randomSnapshot(7, tt.resources)
			want := Summarize(s, tt.opts)
			if (want.Truncated != nil) != tt.wantCut {
				t.Fatalf("Truncated = %+v, want cut %v", want.Truncated, tt.wantCut)
			}
			// Kindless, ambiguous and kinded keys of one policy never make two entries under one
			// key: the hub's CRD would refuse the summary.
			if err := want.Validate(); err != nil {
				t.Fatalf("the summary breaks the API's rules: %v", err)
			}
			wantJSON := mustJSON(t, want)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range 20 {
				got := Summarize(shuffled(s, r), tt.opts)
				if g := mustJSON(t, got); g != wantJSON {
					t.Fatalf("shuffle %d: summary differs:\n%s\nwant\n%s", i, g, wantJSON)
				}
				if got.ContentHash != want.ContentHash {
					t.Fatalf("shuffle %d: hash %s, want %s", i, got.ContentHash, want.ContentHash)
				}
			}
			// Pure: the input is read, never written.
			if !reflect.DeepEqual(s, randomSnapshot(7, tt.resources)) {
				t.Error("Summarize changed its input")
			}
		})
	}
}

func TestSummarizeMaxBytes(t *testing.T) {
	s := randomSnapshot(3, 2000)
	full := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: 1 << 30})
	if full.Truncated == nil || full.Truncated.Applications != 0 || full.Truncated.Policies != 0 {
		t.Fatalf("unbounded summary cut applications or policies: %+v", full.Truncated)
	}

	t.Run("applications are halved first, the most failing kept", func(t *testing.T) {
		const limit = 40_000
		got := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: limit})
		if n := len(mustCompact(t, got)); n >= limit {
			t.Fatalf("summary is %d bytes, limit %d", n, limit)
		}
		if got.Truncated == nil || got.Truncated.Applications == 0 {
			t.Fatalf("Truncated = %+v, want applications cut", got.Truncated)
		}
		if kept, cut := len(got.Applications), int(got.Truncated.Applications); kept+cut != len(full.Applications) {
			t.Errorf("kept %d + cut %d applications, want %d in all", kept, cut, len(full.Applications))
		}
		if got.Truncated.Violations > full.Truncated.Violations && len(got.Applications) > 0 {
			t.Errorf("violations cut (%d) while %d applications remain", got.Truncated.Violations, len(got.Applications))
		}
		if len(full.Exceptions) == 0 || !reflect.DeepEqual(got.Exceptions, full.Exceptions) || got.Truncated.Exceptions != 0 {
			t.Errorf("exceptions %+v (cut %d) while applications remain, want all of %+v", got.Exceptions, got.Truncated.Exceptions, full.Exceptions)
		}
		minKept := int64(1 << 62)
		for _, a := range got.Applications {
			minKept = min(minKept, violations(a.Results))
		}
		kept := map[string]bool{}
		for _, a := range got.Applications {
			kept[a.Namespace+"/"+a.Name+"/"+a.Policy] = true
		}
		for _, a := range full.Applications {
			if !kept[a.Namespace+"/"+a.Name+"/"+a.Policy] && violations(a.Results) > minKept {
				t.Errorf("dropped %s/%s %s with %d fail+error, kept one with %d", a.Namespace, a.Name, a.Policy, violations(a.Results), minKept)
			}
		}
		if got.Totals != full.Totals || got.Blocked != full.Blocked {
			t.Errorf("totals %+v blocked %d, want %+v %d", got.Totals, got.Blocked, full.Totals, full.Blocked)
		}
	})

	t.Run("applications go first, then violations, then exceptions, then policies", func(t *testing.T) {
		cut := map[string]bool{}
		for limit := 60_000; limit > 0; limit -= 1500 {
			got := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: limit})
			if n := len(mustCompact(t, got)); n >= limit && len(got.Policies)+len(got.Exceptions)+len(got.Violations)+len(got.Applications) > 0 {
				t.Fatalf("limit %d: summary is %d bytes", limit, n)
			}
			tr := got.Truncated
			if tr.Exceptions > 0 {
				cut["exceptions"] = true
				if len(got.Applications)+len(got.Violations) > 0 {
					t.Errorf("limit %d: %d exceptions cut while %d applications and %d violations remain", limit, tr.Exceptions, len(got.Applications), len(got.Violations))
				}
				if kept, want := got.Exceptions, full.Exceptions[:len(got.Exceptions)]; !slices.Equal(kept, want) {
					t.Errorf("limit %d: kept exceptions %+v, want the first of %+v", limit, kept, want)
				}
			}
			if tr.Policies > 0 {
				cut["policies"] = true
				if len(got.Exceptions) > 0 {
					t.Errorf("limit %d: %d policies cut while %d exceptions remain", limit, tr.Policies, len(got.Exceptions))
				}
			}
		}
		if !cut["exceptions"] || !cut["policies"] {
			t.Errorf("no limit cut exceptions and policies: %v", cut)
		}
	})

	t.Run("nothing fits: every list is emptied and counted", func(t *testing.T) {
		got := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: 1})
		if len(got.Applications)+len(got.Violations)+len(got.Policies)+len(got.Exceptions)+len(got.Namespaces) != 0 {
			t.Fatalf("kept %d applications, %d violations, %d policies, %d exceptions, %d namespaces",
				len(got.Applications), len(got.Violations), len(got.Policies), len(got.Exceptions), len(got.Namespaces))
		}
		want := policyhubv1.Truncation{
			Policies:     int32(len(full.Policies)),
			Applications: int32(len(full.Applications)),
			Namespaces:   int32(len(full.Namespaces)),
			Violations:   full.Truncated.Violations + int64(len(full.Violations)),
			Exceptions:   int32(len(full.Exceptions)),
		}
		if *got.Truncated != want {
			t.Errorf("Truncated = %+v, want %+v", *got.Truncated, want)
		}
		if got.Totals != full.Totals {
			t.Errorf("Totals = %+v, want %+v", got.Totals, full.Totals)
		}
	})
}

func mustCompact(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Sizes of the bound test: the cluster DESIGN says a summary must fit for.
const (
	bigResources    = 50_000
	bigPolicies     = 200
	bigApplications = 3_000
	bigNamespaces   = 50
	bigPatterns     = 10 // policy p fails for resource i when (p+i)%10 == 0: 10% of results fail
	// Every resource has one result exempted by exception i%300, whose name is as long as the
	// API allows: more exceptions than a summary keeps, each of the longest name.
	bigExceptions = 300
)

// bigSnapshot builds the 50k × 200 cluster. Resources with the same failure pattern share their
// (read-only) result and violation slices, so 10M results take ten slices, not 1 GB.
func bigSnapshot() collect.Snapshot {
	severities := []string{"info", "low", "medium", "high", "critical"}
	s := collect.Snapshot{
		Policies:     make(map[collect.PolicyKey]collect.PolicyInfo, bigPolicies),
		Applications: make(map[types.UID]string, bigResources),
		Digests:      make([]*collect.Digest, bigResources),
	}
	keys := make([]collect.PolicyKey, bigPolicies)
	for p := range keys {
		name := fmt.Sprintf("policy-%03d", p)
		keys[p] = collect.PolicyKey{Name: name} // kindless, as wgpolicyk8s.io results name policies
		s.Policies[collect.PolicyKey{Kind: "ClusterPolicy", Name: name}] = collect.PolicyInfo{
			Title: "Policy " + name, Category: "Best Practices", Severity: severities[p%len(severities)],
		}
	}
	message := strings.Repeat("m", 1024)
	var results [bigPatterns][]collect.PolicyCounts
	var viols [bigPatterns][]collect.Violation
	for pat := range bigPatterns {
		results[pat] = make([]collect.PolicyCounts, bigPolicies)
		for p, k := range keys {
			c := collect.Counts{Pass: 1}
			if (p+pat)%bigPatterns == 0 {
				c = collect.Counts{Fail: 1}
				viols[pat] = append(viols[pat], collect.Violation{
					Policy: k, Rule: "check", Result: "fail", Message: message, Time: t0.Add(time.Duration(pat) * time.Minute),
				})
			}
			results[pat][p] = collect.NewPolicyCounts(k, "", "", c)
		}
	}
	exceptions := make([][]collect.ExceptionCount, bigExceptions)
	for e := range exceptions {
		name := fmt.Sprintf("fpex-%03d-", e)
		name += strings.Repeat("x", policyhubv1.MaxSummaryNameLength-len(name))
		exceptions[e] = []collect.ExceptionCount{{Name: name, Results: 1}}
	}
	digests := make([]collect.Digest, bigResources)
	for i := range digests {
		a := i % bigApplications
		uid := types.UID(fmt.Sprintf("uid-%05d", i))
		digests[i] = collect.Digest{
			Resource:   collect.Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: fmt.Sprintf("ns-%02d", a%bigNamespaces), Name: fmt.Sprintf("deploy-%05d", i), UID: uid},
			Policies:   results[i%bigPatterns],
			Violations: viols[i%bigPatterns],
			Exceptions: exceptions[i%bigExceptions],
		}
		s.Digests[i] = &digests[i]
		s.Applications[uid] = fmt.Sprintf("app-%04d", a)
		if i%100 == 0 {
			s.Blocks = append(s.Blocks, &collect.Block{Policy: collect.PolicyKey{Kind: "ClusterPolicy", Name: keys[i%bigPolicies].Name}, Resource: digests[i].Resource, Count: 2})
		}
	}
	return s
}

func TestSummarizeBound50k(t *testing.T) {
	s := bigSnapshot()
	start := time.Now()
	spec := Summarize(s, Options{Cluster: "east-1"})
	t.Logf("Summarize took %v", time.Since(start))
	data := mustCompact(t, spec)
	t.Logf("summary: %d bytes, %d policies, %d applications, %d violations, truncated %+v",
		len(data), len(spec.Policies), len(spec.Applications), len(spec.Violations), spec.Truncated)

	if len(data) >= 512*1024 {
		t.Errorf("summary is %d bytes, want < 512 KiB", len(data))
	}
	const results = bigResources * bigPolicies
	wantTotals := policyhubv1.ResultCounts{Pass: results * 9 / 10, Fail: results / 10}
	if spec.Totals != wantTotals {
		t.Errorf("Totals = %+v, want %+v", spec.Totals, wantTotals)
	}
	if want := int64(bigResources / 100 * 2); spec.Blocked != want {
		t.Errorf("Blocked = %d, want %d", spec.Blocked, want)
	}
	tr := spec.Truncated
	if tr == nil || tr.Applications == 0 || tr.Violations == 0 {
		t.Fatalf("Truncated = %+v, want applications and violations cut", tr)
	}
	if got, want := len(spec.Applications)+int(tr.Applications), bigApplications*bigPolicies; got != want {
		t.Errorf("kept + cut applications = %d, want %d", got, want)
	}
	if got, want := int64(len(spec.Violations))+tr.Violations, int64(results/10); got != want {
		t.Errorf("kept + cut violations = %d, want %d", got, want)
	}
	if got := len(spec.Policies) + int(tr.Policies); got != bigPolicies {
		t.Errorf("kept + cut policies = %d, want %d", got, bigPolicies)
	}
	if len(spec.Applications) > 2000 || len(spec.Violations) > 50 || len(spec.Policies) > 1000 {
		t.Errorf("over the API's limits: %d applications, %d violations, %d policies", len(spec.Applications), len(spec.Violations), len(spec.Policies))
	}
	for _, v := range spec.Violations {
		if len(v.Message) > collect.MaxMessage {
			t.Fatalf("message of %d bytes", len(v.Message))
		}
		if v.Severity != "critical" {
			t.Fatalf("violation of severity %q kept before critical ones", v.Severity)
		}
	}
	// 50,000 = 166 × 300 + 200: exceptions 0 to 199 have one result more than the others.
	if len(spec.Exceptions) != policyhubv1.MaxSummaryExceptions || tr.Exceptions != bigExceptions-policyhubv1.MaxSummaryExceptions {
		t.Errorf("kept %d exceptions, cut %d; want 200 kept, 100 cut", len(spec.Exceptions), tr.Exceptions)
	}
	for i, e := range spec.Exceptions {
		if !strings.HasPrefix(e.Name, fmt.Sprintf("fpex-%03d-", i)) || e.Results != bigResources/bigExceptions+1 {
			t.Fatalf("exceptions[%d] = %.12s… with %d results, want fpex-%03d with %d", i, e.Name, e.Results, i, bigResources/bigExceptions+1)
		}
	}
	if err := spec.Validate(); err != nil {
		t.Errorf("the summary breaks the API's rules: %v", err)
	}
	for _, p := range spec.Policies {
		if p.Kind != "ClusterPolicy" || p.Severity == "" {
			t.Fatalf("policy %s: kind %q severity %q, want both from the annotations", p.Name, p.Kind, p.Severity)
		}
	}
}

func BenchmarkSummarize50k(b *testing.B) {
	s := bigSnapshot()
	var n int
	for b.Loop() {
		spec := Summarize(s, Options{Cluster: "east-1"})
		data, err := json.Marshal(spec)
		if err != nil {
			b.Fatal(err)
		}
		n = len(data)
	}
	b.ReportMetric(float64(n), "bytes/summary")
}
