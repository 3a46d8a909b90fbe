package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
)

// kyvernoVersionPattern is KyvernoFacts.Version's CRD pattern.
var kyvernoVersionPattern = regexp.MustCompile(`^(v?[0-9]+\.[0-9]+(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?)?$`)

// reportedResultKinds are what KyvernoFacts.ReportedResults may hold (its CRD enum).
var reportedResultKinds = []string{"pass", "fail", "warn", "error", "skip"}

// engine checks spec.engine's policy APIs, Kyverno facts and legacy inventory: the hub shows them
// per cluster and gates Kyverno upgrades on the legacy counts, so they are held to the CRD's
// bounds, and the inventory to what it can mean (each kind and owner counted once, no object
// named twice, no more names of a kind and owner than its count).
func (v *validator) engine(e *EngineInfo) {
	v.items("spec.engine.policyAPIs", len(e.PolicyAPIs), MaxSummaryPolicyAPIs)
	seenAPIs := map[string]bool{}
	for i, api := range e.PolicyAPIs {
		path := fmt.Sprintf("spec.engine.policyAPIs[%d]", i)
		if seenAPIs[api] {
			v.fail("%s: %q listed twice", path, api)
		}
		seenAPIs[api] = true
		v.str(path, api, MaxSummaryPolicyAPILength)
	}
	if k := e.Kyverno; k != nil {
		v.str("spec.engine.kyverno.version", k.Version, MaxKyvernoVersionLength)
		if !kyvernoVersionPattern.MatchString(k.Version) {
			v.fail("spec.engine.kyverno.version: %q is not a version such as v1.19.1", k.Version)
		}
		v.str("spec.engine.kyverno.versionSource", k.VersionSource, MaxKyvernoVersionSourceLength)
		v.str("spec.engine.kyverno.exceptionNamespace", k.ExceptionNamespace, MaxSummaryNamespaceLength)
		v.str("spec.engine.kyverno.dryRunsNotCounted", k.DryRunsNotCounted, MaxDryRunsNotCountedLength)
		v.items("spec.engine.kyverno.reportedResults", len(k.ReportedResults), len(reportedResultKinds))
		for i, r := range k.ReportedResults {
			path := fmt.Sprintf("spec.engine.kyverno.reportedResults[%d]", i)
			if !slices.Contains(reportedResultKinds, r) {
				v.fail("%s: %q, want one of pass, fail, warn, error, skip", path, r)
			} else if slices.Index(k.ReportedResults, r) != i {
				v.fail("%s: %q listed twice", path, r)
			}
		}
	}
	if e.Legacy != nil {
		v.legacy(e.Legacy)
	}
	v.items("spec.engine.engines", len(e.Engines), len(PolicyEngines()))
	for i, name := range e.Engines {
		path := fmt.Sprintf("spec.engine.engines[%d]", i)
		v.policyEngine(path, name)
		if slices.Index(e.Engines, name) != i {
			v.fail("%s: %q listed twice", path, name)
		}
	}
	if g := e.Gatekeeper; g != nil {
		v.str("spec.engine.gatekeeper.version", g.Version, MaxKyvernoVersionLength)
		if !kyvernoVersionPattern.MatchString(g.Version) {
			v.fail("spec.engine.gatekeeper.version: %q is not a version such as v3.23.1", g.Version)
		}
		v.str("spec.engine.gatekeeper.versionSource", g.VersionSource, MaxKyvernoVersionSourceLength)
	}
	if a := e.AdmissionPolicies; a != nil {
		v.str("spec.engine.admissionPolicies.refusalsNotCounted", a.RefusalsNotCounted, MaxDryRunsNotCountedLength)
		v.str("spec.engine.admissionPolicies.notEvaluated", a.NotEvaluated, MaxNotEvaluatedLength)
	}
}

// policyEngine checks that name is one of PolicyEngines (the CRD's enum).
func (v *validator) policyEngine(path string, name PolicyEngine) {
	if !slices.Contains(PolicyEngines(), name) {
		v.fail("%s: %q, want one of Kyverno, Kubernetes, Gatekeeper", path, name)
	}
}

type legacyCountKey struct {
	kind  string
	owner LegacyOwner
}

func (v *validator) legacy(l *LegacyInventory) {
	v.items("spec.engine.legacy.counts", len(l.Counts), MaxLegacyCounts)
	counts := map[legacyCountKey]int64{}
	for i, c := range l.Counts {
		path := fmt.Sprintf("spec.engine.legacy.counts[%d]", i)
		v.legacyKind(path, c.Kind, c.Owner)
		key := legacyCountKey{c.Kind, c.Owner}
		if _, dup := counts[key]; dup {
			v.fail("%s: a second count of %s objects owned by %s", path, c.Kind, c.Owner)
		}
		counts[key] = c.Count
		v.count(path+".count", c.Count)
	}
	v.items("spec.engine.legacy.objects", len(l.Objects), MaxLegacyNames)
	type objectKey struct{ kind, namespace, name string }
	seen := map[objectKey]bool{}
	named := map[legacyCountKey]int64{}
	for i, o := range l.Objects {
		path := fmt.Sprintf("spec.engine.legacy.objects[%d]", i)
		v.legacyKind(path, o.Kind, o.Owner)
		if o.Name == "" {
			v.fail("%s.name: empty, an object is named", path)
		}
		v.str(path+".name", o.Name, MaxSummaryNameLength)
		v.str(path+".namespace", o.Namespace, MaxSummaryNamespaceLength)
		key := objectKey{o.Kind, o.Namespace, o.Name}
		if seen[key] {
			v.fail("%s: %s %s/%s named twice", path, o.Kind, o.Namespace, o.Name)
		}
		seen[key] = true
		ck := legacyCountKey{o.Kind, o.Owner}
		if named[ck]++; named[ck] > counts[ck] {
			v.fail("%s: more %s objects owned by %s named than counted (%d)", path, o.Kind, o.Owner, counts[ck])
		}
	}
}

func (v *validator) legacyKind(path, kind string, owner LegacyOwner) {
	if !slices.Contains(LegacyKinds, kind) {
		v.fail("%s.kind: %q is not one of Kyverno's legacy kinds", path, kind)
	}
	if owner != LegacyOwnerPolicyhub && owner != LegacyOwnerOther {
		v.fail("%s.owner: %q, want policyhub or other", path, owner)
	}
}
