package v1alpha1

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of what an agent may say in a PolicyReportSummary: the CRD's maxLength and maxItems
// (markers cannot name constants; TestSummaryBoundsMatchTheCRD keeps the two equal). The agent cuts
// to them, and Validate checks them on the hub, for summaries an older CRD let through.
const (
	// MaxSummaryNameLength bounds object and cluster names (a DNS-1123 subdomain).
	MaxSummaryNameLength = 253
	// MaxSummaryNamespaceLength bounds namespaces (a DNS-1123 label).
	MaxSummaryNamespaceLength = 63
	// MaxSummaryKindLength bounds kinds (a CRD's kind, lowercased, is a DNS-1035 label).
	MaxSummaryKindLength = 63
	// MaxSummaryRefLength bounds "namespace/name" policy references and "group/version" API versions.
	MaxSummaryRefLength = MaxSummaryNameLength + 1 + MaxSummaryNamespaceLength
	// MaxSummaryRuleLength bounds rule names.
	MaxSummaryRuleLength = 253
	// MaxSummarySeverityLength and MaxSummaryCategoryLength bound the annotations' values.
	MaxSummarySeverityLength = 64
	MaxSummaryCategoryLength = 128
	// MaxSummaryTitleLength and MaxSummaryMessageLength bound titles and Kyverno's messages.
	MaxSummaryTitleLength   = 256
	MaxSummaryMessageLength = 512
	// MaxSummaryHashLength bounds spec.contentHash (hex sha256).
	MaxSummaryHashLength = 64

	MaxSummaryPolicies     = 1000
	MaxSummaryApplications = 2000
	MaxSummaryNamespaces   = 1000
	MaxSummaryViolations   = 200
	MaxSummaryReportAPIs   = 10
	// MaxSummaryExceptions bounds spec.exceptions (its names are MaxSummaryNameLength).
	MaxSummaryExceptions = 200
	// MaxSummaryPolicyAPIs and MaxSummaryPolicyAPILength bound spec.engine.policyAPIs.
	MaxSummaryPolicyAPIs      = 16
	MaxSummaryPolicyAPILength = 128
	// MaxKyvernoVersionLength and MaxKyvernoVersionSourceLength bound spec.engine.kyverno's
	// version and versionSource.
	MaxKyvernoVersionLength       = 64
	MaxKyvernoVersionSourceLength = 256
	// MaxDryRunsNotCountedLength bounds spec.engine.kyverno.dryRunsNotCounted.
	MaxDryRunsNotCountedLength = 256
	// MaxNotEvaluatedLength bounds spec.engine.admissionPolicies.notEvaluated.
	MaxNotEvaluatedLength = 256
	// MaxLegacyCounts bounds spec.engine.legacy.counts: one per legacy kind and owner.
	MaxLegacyCounts = 10
)

// Validate says what in the spec the CRD would refuse (nil when nothing): a negative count, a
// string or list over its bound, invalid UTF-8, an exception or namespace without a name, or two
// policies (or applications, namespaces, or exceptions) under one key.
// The apiserver refuses all of it at admission; the hub checks again because a cluster may run
// an older CRD, and an agent's summary must never be able to change what other clusters say.
func (s *PolicyReportSummarySpec) Validate() error {
	v := validator{}
	v.str("spec.cluster", s.Cluster, MaxSummaryNameLength)
	v.str("spec.contentHash", s.ContentHash, MaxSummaryHashLength)
	v.items("spec.engine.reportAPIs", len(s.Engine.ReportAPIs), MaxSummaryReportAPIs)
	for i, api := range s.Engine.ReportAPIs {
		v.str(fmt.Sprintf("spec.engine.reportAPIs[%d]", i), api, MaxSummaryRefLength)
	}
	v.engine(&s.Engine)
	v.counts("spec.totals", s.Totals)
	v.count("spec.blocked", s.Blocked)
	v.count("spec.blockedDryRuns", s.BlockedDryRuns)
	v.policies(s.Policies)
	v.applications(s.Applications)
	v.namespaces(s.Namespaces)
	v.items("spec.violations", len(s.Violations), MaxSummaryViolations)
	for i := range s.Violations {
		v.violation(fmt.Sprintf("spec.violations[%d]", i), &s.Violations[i])
	}
	v.exceptions(s.Exceptions)
	v.shadows(s.Shadows)
	if t := s.Truncated; t != nil {
		v.count("spec.truncated.policies", int64(t.Policies))
		v.count("spec.truncated.applications", int64(t.Applications))
		v.count("spec.truncated.namespaces", int64(t.Namespaces))
		v.count("spec.truncated.violations", t.Violations)
		v.count("spec.truncated.exceptions", int64(t.Exceptions))
		v.count("spec.truncated.shadows", int64(t.Shadows))
	}
	return v.err
}

// PolicySummaryKey is what identifies a spec.policies entry (its listMapKeys).
type PolicySummaryKey struct{ Name, Namespace, Kind string }

// Key is the entry's key: one entry per key.
func (p *PolicySummary) Key() PolicySummaryKey {
	return PolicySummaryKey{Name: p.Name, Namespace: p.Namespace, Kind: p.Kind}
}

// ApplicationSummaryKey is what identifies a spec.applications entry (its listMapKeys).
type ApplicationSummaryKey struct{ Namespace, Name, Policy string }

// Key is the entry's key: one entry per key.
func (a *ApplicationSummary) Key() ApplicationSummaryKey {
	return ApplicationSummaryKey{Namespace: a.Namespace, Name: a.Name, Policy: a.Policy}
}

// validator keeps the first problem found.
type validator struct{ err error }

func (v *validator) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf(format, args...)
	}
}

func (v *validator) str(path, s string, n int) {
	if len(s) > n {
		v.fail("%s: %d bytes, at most %d allowed", path, len(s), n)
	} else if !utf8.ValidString(s) {
		v.fail("%s: not valid UTF-8", path)
	}
}

func (v *validator) items(path string, n, limit int) {
	if n > limit {
		v.fail("%s: %d entries, at most %d allowed", path, n, limit)
	}
}

func (v *validator) count(path string, n int64) {
	if n < 0 {
		v.fail("%s: %d, a count cannot be negative", path, n)
	}
}

func (v *validator) counts(path string, c ResultCounts) {
	v.count(path+".pass", c.Pass)
	v.count(path+".fail", c.Fail)
	v.count(path+".warn", c.Warn)
	v.count(path+".error", c.Error)
	v.count(path+".skip", c.Skip)
}

func (v *validator) resource(path string, r *ResourceRef) {
	if r == nil {
		return
	}
	v.str(path+".apiVersion", r.APIVersion, MaxSummaryRefLength)
	v.str(path+".kind", r.Kind, MaxSummaryKindLength)
	v.str(path+".namespace", r.Namespace, MaxSummaryNamespaceLength)
	v.str(path+".name", r.Name, MaxSummaryNameLength)
}

func (v *validator) policies(policies []PolicySummary) {
	v.items("spec.policies", len(policies), MaxSummaryPolicies)
	seen := make(map[PolicySummaryKey]struct{}, len(policies))
	for i := range policies {
		p := &policies[i]
		path := fmt.Sprintf("spec.policies[%d]", i)
		if _, dup := seen[p.Key()]; dup {
			v.fail("%s: a second entry for policy %q (namespace %q, kind %q)", path, p.Name, p.Namespace, p.Kind)
		}
		seen[p.Key()] = struct{}{}
		v.str(path+".name", p.Name, MaxSummaryNameLength)
		v.str(path+".namespace", p.Namespace, MaxSummaryNamespaceLength)
		v.str(path+".kind", p.Kind, MaxSummaryKindLength)
		if p.Engine != "" {
			v.policyEngine(path+".engine", p.Engine)
		}
		v.str(path+".title", p.Title, MaxSummaryTitleLength)
		v.str(path+".category", p.Category, MaxSummaryCategoryLength)
		v.str(path+".severity", p.Severity, MaxSummarySeverityLength)
		v.counts(path+".results", p.Results)
		v.count(path+".blocked", p.Blocked)
		v.count(path+".blockedDryRuns", p.BlockedDryRuns)
		if b := p.LastBlocked; b != nil {
			v.resource(path+".lastBlocked.resource", b.Resource)
			v.str(path+".lastBlocked.message", b.Message, MaxSummaryMessageLength)
		}
	}
}

func (v *validator) applications(apps []ApplicationSummary) {
	v.items("spec.applications", len(apps), MaxSummaryApplications)
	seen := make(map[ApplicationSummaryKey]struct{}, len(apps))
	for i := range apps {
		a := &apps[i]
		path := fmt.Sprintf("spec.applications[%d]", i)
		if _, dup := seen[a.Key()]; dup {
			v.fail("%s: a second entry for application %s/%s and policy %q", path, a.Namespace, a.Name, a.Policy)
		}
		seen[a.Key()] = struct{}{}
		v.str(path+".namespace", a.Namespace, MaxSummaryNamespaceLength)
		v.str(path+".name", a.Name, MaxSummaryNameLength)
		v.str(path+".policy", a.Policy, MaxSummaryRefLength)
		v.counts(path+".results", a.Results)
		v.count(path+".blocked", a.Blocked)
	}
}

func (v *validator) namespaces(namespaces []NamespaceSummary) {
	v.items("spec.namespaces", len(namespaces), MaxSummaryNamespaces)
	seen := make(map[string]struct{}, len(namespaces))
	for i := range namespaces {
		n := &namespaces[i]
		path := fmt.Sprintf("spec.namespaces[%d]", i)
		if _, dup := seen[n.Namespace]; dup {
			v.fail("%s: a second entry for namespace %q", path, n.Namespace)
		}
		seen[n.Namespace] = struct{}{}
		if n.Namespace == "" {
			v.fail("%s.namespace: empty, a namespace is named", path)
		}
		v.str(path+".namespace", n.Namespace, MaxSummaryNamespaceLength)
		v.counts(path+".results", n.Results)
		v.count(path+".blocked", n.Blocked)
	}
}

func (v *validator) exceptions(exceptions []ExceptionResults) {
	v.items("spec.exceptions", len(exceptions), MaxSummaryExceptions)
	seen := make(map[string]struct{}, len(exceptions))
	for i := range exceptions {
		e := &exceptions[i]
		path := fmt.Sprintf("spec.exceptions[%d]", i)
		if _, dup := seen[e.Name]; dup {
			v.fail("%s: a second entry for exception %q", path, e.Name)
		}
		seen[e.Name] = struct{}{}
		if e.Name == "" {
			v.fail("%s.name: empty, an exception is named", path)
		}
		v.str(path+".name", e.Name, MaxSummaryNameLength)
		v.count(path+".results", e.Results)
	}
}

func (v *validator) violation(path string, x *Violation) {
	v.str(path+".cluster", x.Cluster, MaxSummaryNameLength)
	v.str(path+".policy", x.Policy, MaxSummaryRefLength)
	v.str(path+".rule", x.Rule, MaxSummaryRuleLength)
	v.str(path+".severity", x.Severity, MaxSummarySeverityLength)
	v.str(path+".message", x.Message, MaxSummaryMessageLength)
	v.resource(path+".resource", &x.Resource)
	if x.Result != "fail" && x.Result != "error" {
		v.fail("%s.result: %q, want fail or error", path, x.Result)
	}
}

// maxShadowHashLength bounds a shadow entry's content hash ("sha256:" and 64 hex digits).
const maxShadowHashLength = 100

// shadows checks spec.shadows: bounded, one entry per shadow, every name a shadow's, the counts
// consistent (a shadow cannot fail more resources than it has results for), the verdicts known.
func (v *validator) shadows(shadows []ShadowResults) {
	v.items("spec.shadows", len(shadows), MaxSummaryShadows)
	seen := make(map[PolicySummaryKey]struct{}, len(shadows))
	for i := range shadows {
		s := &shadows[i]
		path := fmt.Sprintf("spec.shadows[%d]", i)
		key := PolicySummaryKey{Name: s.Name, Namespace: s.Namespace, Kind: s.Kind}
		if _, dup := seen[key]; dup {
			v.fail("%s: a second entry for shadow %q (namespace %q, kind %q)", path, s.Name, s.Namespace, s.Kind)
		}
		seen[key] = struct{}{}
		if !IsShadowName(s.Name) {
			v.fail("%s.name: %q is not a shadow's name (it must start with %s)", path, s.Name, ShadowPrefix)
		}
		v.str(path+".name", s.Name, MaxSummaryNameLength)
		v.str(path+".namespace", s.Namespace, MaxSummaryNamespaceLength)
		v.str(path+".kind", s.Kind, MaxSummaryKindLength)
		v.str(path+".of", s.Of, MaxSummaryKindLength+1+MaxSummaryRefLength)
		v.str(path+".contentHash", s.ContentHash, maxShadowHashLength)
		for _, c := range []struct {
			field string
			n     int64
		}{{"resources", s.Resources}, {"wouldFail", s.WouldFail}, {"newlyFailing", s.NewlyFailing}, {"same", s.Same}, {"differ", s.Differ}, {"onlyShadow", s.OnlyShadow}, {"onlyLive", s.OnlyLive}} {
			v.count(path+"."+c.field, c.n)
		}
		if s.WouldFail > s.Resources || s.NewlyFailing > s.WouldFail || s.Same > s.Resources || s.Differ > s.Resources || s.OnlyShadow > s.Resources {
			v.fail("%s: counts disagree: wouldFail ≤ resources, newlyFailing ≤ wouldFail and same, differ, onlyShadow ≤ resources must hold", path)
		}
		v.items(path+".firstNewlyFailing", len(s.FirstNewlyFailing), MaxShadowNamed)
		for j := range s.FirstNewlyFailing {
			v.resource(fmt.Sprintf("%s.firstNewlyFailing[%d]", path, j), &s.FirstNewlyFailing[j])
		}
		v.items(path+".firstDiffering", len(s.FirstDiffering), MaxShadowNamed)
		for j := range s.FirstDiffering {
			d := &s.FirstDiffering[j]
			p := fmt.Sprintf("%s.firstDiffering[%d]", path, j)
			v.resource(p+".resource", &d.Resource)
			if !d.Shadow.Known() || !d.Live.Known() {
				v.fail("%s: verdicts %q and %q: each must be pass, fail, skip or none", p, d.Shadow, d.Live)
			}
		}
	}
}
