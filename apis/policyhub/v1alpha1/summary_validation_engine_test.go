package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func engineSpec() PolicyReportSummarySpec {
	yes := true
	s := validSpec()
	s.Engine.PolicyAPIs = []string{"kyverno.io/v1", "kyverno.io/v2", "policies.kyverno.io/v1"}
	s.Engine.Kyverno = &KyvernoFacts{Version: "v1.19.1", VersionSource: "image tag of Deployment kyverno/kyverno-admission-controller",
		PolicyExceptions: &yes, ExceptionNamespace: "policyhub-system", ReportedResults: []string{"fail", "error"}}
	s.Engine.Legacy = &LegacyInventory{
		Counts: []LegacyCount{{Kind: "ClusterPolicy", Owner: LegacyOwnerOther, Count: 2}, {Kind: "ClusterPolicy", Owner: LegacyOwnerPolicyhub, Count: 1},
			{Kind: "PolicyException", Owner: LegacyOwnerOther, Count: 300}},
		Objects: []LegacyObject{{Kind: "ClusterPolicy", Name: "a", Owner: LegacyOwnerOther}, {Kind: "PolicyException", Namespace: "ns", Name: "a", Owner: LegacyOwnerOther},
			{Kind: "ClusterPolicy", Name: "b", Owner: LegacyOwnerPolicyhub}},
	}
	return s
}

// Validate refuses an agent's engine facts and legacy inventory beyond the CRD's bounds or
// beyond what they can mean, naming the field.
func TestSummaryValidateEngine(t *testing.T) {
	tests := []struct {
		name   string
		change func(*EngineInfo)
		want   string // "" means valid
	}{
		{"valid", func(*EngineInfo) {}, ""},
		{"nothing known", func(e *EngineInfo) { *e = EngineInfo{} }, ""},
		{"no legacy object", func(e *EngineInfo) { e.Legacy = &LegacyInventory{} }, ""},
		{"unsorted names", func(e *EngineInfo) { slices.Reverse(e.Legacy.Objects) }, ""},
		{"too many policy APIs", func(e *EngineInfo) {
			e.PolicyAPIs = nil
			for i := range MaxSummaryPolicyAPIs + 1 {
				e.PolicyAPIs = append(e.PolicyAPIs, fmt.Sprintf("kyverno.io/v%d", i))
			}
		}, "spec.engine.policyAPIs: 17 entries, at most 16"},
		{"a policy API twice", func(e *EngineInfo) { e.PolicyAPIs = append(e.PolicyAPIs, "kyverno.io/v1") }, `spec.engine.policyAPIs[3]: "kyverno.io/v1" listed twice`},
		{"an overlong policy API", func(e *EngineInfo) { e.PolicyAPIs[0] = strings.Repeat("x", 129) }, "spec.engine.policyAPIs[0]: 129 bytes"},
		{"a version that is none", func(e *EngineInfo) { e.Kyverno.Version = "latest" }, `spec.engine.kyverno.version: "latest" is not a version`},
		{"an overlong version", func(e *EngineInfo) { e.Kyverno.Version = "v1.19.1-" + strings.Repeat("a", 60) }, "spec.engine.kyverno.version: 68 bytes"},
		{"an overlong version source", func(e *EngineInfo) { e.Kyverno.VersionSource = strings.Repeat("s", 257) }, "spec.engine.kyverno.versionSource: 257 bytes"},
		{"a version source in invalid UTF-8", func(e *EngineInfo) { e.Kyverno.VersionSource = "image \xff" }, "spec.engine.kyverno.versionSource: not valid UTF-8"},
		{"an overlong exception namespace", func(e *EngineInfo) { e.Kyverno.ExceptionNamespace = strings.Repeat("n", 64) }, "spec.engine.kyverno.exceptionNamespace: 64 bytes"},
		{"an unknown result", func(e *EngineInfo) { e.Kyverno.ReportedResults = []string{"fail", "allow"} }, `spec.engine.kyverno.reportedResults[1]: "allow"`},
		{"a result twice", func(e *EngineInfo) { e.Kyverno.ReportedResults = []string{"fail", "fail"} }, `spec.engine.kyverno.reportedResults[1]: "fail" listed twice`},
		{"a negative legacy count", func(e *EngineInfo) { e.Legacy.Counts[2].Count = -300 }, "spec.engine.legacy.counts[2].count: -300"},
		{"a kind counted twice", func(e *EngineInfo) {
			e.Legacy.Counts = append(e.Legacy.Counts, LegacyCount{Kind: "ClusterPolicy", Owner: LegacyOwnerOther, Count: 5})
		}, "spec.engine.legacy.counts[3]: a second count of ClusterPolicy objects owned by other"},
		{"a kind that is not legacy", func(e *EngineInfo) { e.Legacy.Counts[0].Kind = "ValidatingPolicy" }, `spec.engine.legacy.counts[0].kind: "ValidatingPolicy"`},
		{"an unknown owner", func(e *EngineInfo) { e.Legacy.Counts[0].Owner = "cluster-2" }, `spec.engine.legacy.counts[0].owner: "cluster-2"`},
		{"too many counts", func(e *EngineInfo) { e.Legacy.Counts = make([]LegacyCount, MaxLegacyCounts+1) }, "spec.engine.legacy.counts: 11 entries, at most 10"},
		{"too many names", func(e *EngineInfo) {
			e.Legacy.Counts[2].Count = 1000
			e.Legacy.Objects = nil
			for i := range MaxLegacyNames + 1 {
				e.Legacy.Objects = append(e.Legacy.Objects, LegacyObject{Kind: "PolicyException", Namespace: "ns", Name: fmt.Sprint(i), Owner: LegacyOwnerOther})
			}
		}, "spec.engine.legacy.objects: 51 entries, at most 50"},
		{"an object named twice", func(e *EngineInfo) { e.Legacy.Objects = append(e.Legacy.Objects, e.Legacy.Objects[1]) }, "spec.engine.legacy.objects[3]: PolicyException ns/a named twice"},
		{"an object named twice, owners apart", func(e *EngineInfo) {
			e.Legacy.Objects = append(e.Legacy.Objects, LegacyObject{Kind: "ClusterPolicy", Name: "a", Owner: LegacyOwnerPolicyhub})
		}, "spec.engine.legacy.objects[3]: ClusterPolicy /a named twice"},
		{"more names than counted", func(e *EngineInfo) {
			e.Legacy.Objects = append(e.Legacy.Objects, LegacyObject{Kind: "ClusterPolicy", Name: "c", Owner: LegacyOwnerPolicyhub})
		}, "spec.engine.legacy.objects[3]: more ClusterPolicy objects owned by policyhub named than counted (1)"},
		{"names without a count", func(e *EngineInfo) { e.Legacy.Counts = nil }, "spec.engine.legacy.objects[0]: more ClusterPolicy objects owned by other named than counted (0)"},
		{"an object without a name", func(e *EngineInfo) { e.Legacy.Objects[0].Name = "" }, "spec.engine.legacy.objects[0].name: empty"},
		{"an overlong object name", func(e *EngineInfo) { e.Legacy.Objects[0].Name = strings.Repeat("x", 254) }, "spec.engine.legacy.objects[0].name: 254 bytes"},
		{"an overlong object namespace", func(e *EngineInfo) { e.Legacy.Objects[1].Namespace = strings.Repeat("x", 64) }, "spec.engine.legacy.objects[1].namespace: 64 bytes"},
		{"an object of no legacy kind", func(e *EngineInfo) { e.Legacy.Objects[0].Kind = "Deployment" }, `spec.engine.legacy.objects[0].kind: "Deployment"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := engineSpec()
			tt.change(&s.Engine)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// Validate never panics on an agent's engine facts, and what it lets through holds: counts that
// are not negative, each kind and owner once and a legacy kind, no object named twice nor more
// names than counted, strings within their bounds.
func FuzzSummaryEngineValidation(f *testing.F) {
	f.Add("kyverno.io/v1", "v1.19.1", "image tag", "policyhub-system", "fail", "ClusterPolicy", "other", "", "p", int64(2), uint8(1), uint8(1))
	f.Add("kyverno.io/v1", "latest", "x", "", "allow", "Policy", "policyhub", "ns", "", int64(-1), uint8(3), uint8(2))
	f.Add("policies.kyverno.io/v1\xff", "1.20.0-rc.1", "", "*", "pass", "ValidatingPolicy", "cluster-2", "ns", "p", int64(0), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, api, version, source, exceptionNS, result, kind, owner, namespace, name string, count int64, counts, names uint8) {
		s := validSpec()
		e := &s.Engine
		e.PolicyAPIs = []string{api, api + "x"}[:1+int(counts%2)]
		e.Kyverno = &KyvernoFacts{Version: version, VersionSource: source, ExceptionNamespace: exceptionNS, ReportedResults: []string{result, "fail"}[:1+int(names%2)]}
		e.Legacy = &LegacyInventory{}
		for i := range int(counts % 4) {
			e.Legacy.Counts = append(e.Legacy.Counts, LegacyCount{Kind: kind, Owner: LegacyOwner(owner), Count: count + int64(i)})
		}
		for i := range int(names % 5) {
			e.Legacy.Objects = append(e.Legacy.Objects, LegacyObject{Kind: kind, Owner: LegacyOwner(owner), Namespace: namespace, Name: name + strings.Repeat("x", i%3)})
		}
		if s.Validate() != nil {
			return
		}
		checkEngineInvariants(t, e)
	})
}

func checkEngineInvariants(t *testing.T, e *EngineInfo) {
	t.Helper()
	bounded := func(s string, n int) {
		if len(s) > n || !utf8.ValidString(s) {
			t.Fatalf("valid engine with the string %q (%d bytes, at most %d)", s, len(s), n)
		}
	}
	for _, api := range e.PolicyAPIs {
		bounded(api, MaxSummaryPolicyAPILength)
	}
	if k := e.Kyverno; k != nil {
		bounded(k.Version, MaxKyvernoVersionLength)
		bounded(k.VersionSource, MaxKyvernoVersionSourceLength)
		bounded(k.ExceptionNamespace, MaxSummaryNamespaceLength)
		for i, r := range k.ReportedResults {
			if !slices.Contains(reportedResultKinds, r) || slices.Index(k.ReportedResults, r) != i {
				t.Fatalf("valid engine reports results %q", k.ReportedResults)
			}
		}
	}
	counted := map[legacyCountKey]int64{}
	for _, c := range e.Legacy.Counts {
		if _, dup := counted[legacyCountKey{c.Kind, c.Owner}]; dup || c.Count < 0 || !slices.Contains(LegacyKinds, c.Kind) {
			t.Fatalf("valid inventory with the count %+v", c)
		}
		counted[legacyCountKey{c.Kind, c.Owner}] = c.Count
	}
	named := map[legacyCountKey]int64{}
	seen := map[[3]string]bool{}
	for _, o := range e.Legacy.Objects {
		key := [3]string{o.Kind, o.Namespace, o.Name}
		named[legacyCountKey{o.Kind, o.Owner}]++
		if seen[key] || o.Name == "" || named[legacyCountKey{o.Kind, o.Owner}] > counted[legacyCountKey{o.Kind, o.Owner}] {
			t.Fatalf("valid inventory names %+v (twice, unnamed or beyond its count)", o)
		}
		seen[key] = true
		bounded(o.Name, MaxSummaryNameLength)
		bounded(o.Namespace, MaxSummaryNamespaceLength)
	}
}
