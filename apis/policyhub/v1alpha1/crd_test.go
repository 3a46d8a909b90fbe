package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Every field of every CRD has a description, so `kubectl explain fleetpolicy.spec.placement` (and
// any other path) tells a user what the field does. The CRDs are generated from this package's doc
// comments: an undocumented Go field shows up here.
func TestEveryCRDFieldIsDocumented(t *testing.T) {
	for _, crd := range generatedCRDs(t) {
		for _, version := range crd.Spec.Versions {
			var undocumented []string
			root := version.Schema.OpenAPIV3Schema
			for _, top := range []string{"spec", "status"} {
				if prop, ok := root.Properties[top]; ok {
					undocumented = append(undocumented, missingDescriptions(crd.Spec.Names.Singular+"."+top, prop)...)
				}
			}
			if root.Description == "" {
				undocumented = append(undocumented, crd.Spec.Names.Singular)
			}
			sort.Strings(undocumented)
			for _, path := range undocumented {
				t.Errorf("%s %s: %s has no description", crd.Name, version.Name, path)
			}
		}
	}
}

// generatedCRDs reads the CRDs make manifests generates into config/crd.
func generatedCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "crd", "*.yaml"))
	if err != nil || len(files) != 7 {
		t.Fatalf("want the 7 generated CRDs in config/crd, found %v (%v)", files, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		crds = append(crds, crd)
	}
	return crds
}

func missingDescriptions(path string, schema apiextensionsv1.JSONSchemaProps) []string {
	var missing []string
	if schema.Description == "" {
		missing = append(missing, path)
	}
	for name, prop := range schema.Properties {
		missing = append(missing, missingDescriptions(path+"."+name, prop)...)
	}
	if schema.Items != nil && schema.Items.Schema != nil {
		// Items share their list's description; their own fields need one each.
		for name, prop := range schema.Items.Schema.Properties {
			missing = append(missing, missingDescriptions(path+"[]."+name, prop)...)
		}
	}
	return missing
}

// Every CEL rule in the CRDs is plain ASCII. gofmt rewrites two single quotes in a doc comment
// into a typographic closing quote, which silently turns an empty-string comparison in a marker
// into a rule the apiserver refuses to compile; the markers therefore test emptiness with
// size(x) > 0.
func TestCELRulesSurviveGofmt(t *testing.T) {
	rules := 0
	for _, crd := range generatedCRDs(t) {
		for _, version := range crd.Spec.Versions {
			walkSchema(*version.Schema.OpenAPIV3Schema, func(s apiextensionsv1.JSONSchemaProps) {
				for _, v := range s.XValidations {
					rules++
					for _, r := range v.Rule {
						if r > unicode.MaxASCII {
							t.Errorf("%s: rule %q has the non-ASCII character %q", crd.Name, v.Rule, r)
							break
						}
					}
					if v.Message == "" {
						t.Errorf("%s: rule %q has no message for the user", crd.Name, v.Rule)
					}
				}
			})
		}
	}
	if rules < 10 {
		t.Errorf("found %d CEL rules in the CRDs, want at least 10", rules)
	}
}

func walkSchema(s apiextensionsv1.JSONSchemaProps, visit func(apiextensionsv1.JSONSchemaProps)) {
	visit(s)
	for _, p := range s.Properties {
		walkSchema(p, visit)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(*s.Items.Schema, visit)
	}
}

// The bounds the hub fills lists to are the CRDs' MaxItems (markers, which cannot name the
// constants): a ClusterStatusSlice holds MaxClustersPerSlice clusters, a declaration's
// status.summary.attention MaxAttention; were they to differ, a slice or status the hub makes
// would be refused.
func TestListBoundsMatchTheCRDs(t *testing.T) {
	checked := 0
	for _, crd := range generatedCRDs(t) {
		for _, version := range crd.Spec.Versions {
			root := version.Schema.OpenAPIV3Schema.Properties
			if clusters, ok := root["clusters"]; ok && crd.Spec.Names.Kind == "ClusterStatusSlice" {
				checked++
				if clusters.MaxItems == nil || *clusters.MaxItems != MaxClustersPerSlice {
					t.Errorf("%s: clusters maxItems = %v, want MaxClustersPerSlice (%d)", crd.Name, clusters.MaxItems, MaxClustersPerSlice)
				}
			}
			status, ok := root["status"]
			if !ok {
				continue
			}
			if _, ok := status.Properties["clusters"]; ok {
				t.Errorf("%s: status.clusters is back: a declaration's per-cluster state lives in ClusterStatusSlices", crd.Name)
			}
			if attention, ok := status.Properties["summary"].Properties["attention"]; ok {
				checked++
				if attention.MaxItems == nil || *attention.MaxItems != MaxAttention {
					t.Errorf("%s: status.summary.attention maxItems = %v, want MaxAttention (%d)", crd.Name, attention.MaxItems, MaxAttention)
				}
			}
			if crd.Spec.Names.Kind == KindPolicySet {
				for path, want := range map[string]int64{"attentionMembers": MaxAttentionMembers, "changes.added": MaxChangedMembers, "changes.changed": MaxChangedMembers, "changes.removed": MaxChangedMembers} {
					checked++
					prop := status
					for _, p := range strings.Split(path, ".") {
						prop = prop.Properties[p]
					}
					if prop.MaxItems == nil || *prop.MaxItems != want {
						t.Errorf("%s: status.%s maxItems = %v, want %d", crd.Name, path, prop.MaxItems, want)
					}
				}
			}
		}
	}
	if checked != 9 {
		t.Errorf("checked %d lists, want 9 (slice clusters, FleetPolicy, PolicySet, ApplicationPolicy and FleetPolicyException attention, PolicySet members)", checked)
	}
}

// Each generated CRD's schema is structural, and every map list's keys are required or have a
// default: the apiserver refuses a CRD otherwise. controller-gen writes what the markers say; this
// is the apiserver's own structural check of it, without an apiserver (the e2e tests install the
// CRDs, which also compiles their CEL rules).
func TestCRDSchemasAreStructural(t *testing.T) {
	for _, crd := range generatedCRDs(t) {
		for _, version := range crd.Spec.Versions {
			s := structural(t, version.Schema.OpenAPIV3Schema)
			for _, err := range structuralschema.ValidateStructural(nil, s) {
				t.Errorf("%s %s: %v", crd.Name, version.Name, err)
			}
			walkSchema(*version.Schema.OpenAPIV3Schema, func(s apiextensionsv1.JSONSchemaProps) {
				if s.XListType == nil || *s.XListType != "map" {
					return
				}
				item := s.Items.Schema
				for _, key := range s.XListMapKeys {
					if !slices.Contains(item.Required, key) && item.Properties[key].Default == nil {
						t.Errorf("%s %s: list map key %q is neither required nor defaulted", crd.Name, version.Name, key)
					}
				}
			})
		}
	}
}

// structural is the apiserver's structural form of a CRD schema.
func structural(t *testing.T, schema *apiextensionsv1.JSONSchemaProps) *structuralschema.Structural {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The apiserver's list validation, run on summaries as an agent writes them: the kindless and
// the kinded entry of one policy are two keys, and a policy listed twice is refused.
func TestSummaryCRDRefusesAPolicyListedTwice(t *testing.T) {
	s := structural(t, ptrTo(summaryCRD(t)))
	policy := func(name, kind string) map[string]any {
		// As stored: the CRD defaults namespace and kind to "" (TestCRDSchemasAreStructural).
		return map[string]any{"name": name, "namespace": "", "kind": kind, "results": map[string]any{"fail": int64(1)}}
	}
	for _, tt := range []struct {
		name     string
		policies []any
		wantDup  bool
	}{
		{"one entry per key", []any{policy("require-labels", ""), policy("require-labels", "ClusterPolicy"), policy("no-latest", "")}, false},
		{"a policy listed twice", []any{policy("require-labels", "ClusterPolicy"), policy("no-latest", ""), policy("require-labels", "ClusterPolicy")}, true},
		{"a kindless policy listed twice", []any{policy("require-labels", ""), policy("require-labels", "")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{"spec": map[string]any{"cluster": "c", "policies": tt.policies}}
			errs := listtype.ValidateListSetsAndMaps(nil, s, obj)
			if got := len(errs) > 0; got != tt.wantDup {
				t.Errorf("refused %v (%v), want %v", got, errs, tt.wantDup)
			}
			if tt.wantDup && !strings.Contains(errs.ToAggregate().Error(), "Duplicate value") {
				t.Errorf("refusal %v does not say Duplicate value", errs)
			}
		})
	}
}

// The apiserver's list validation of spec.exceptions: one entry per exception name.
func TestSummaryCRDRefusesAnExceptionListedTwice(t *testing.T) {
	s := structural(t, ptrTo(summaryCRD(t)))
	exception := func(name string, results int64) map[string]any {
		return map[string]any{"name": name, "results": results}
	}
	for _, tt := range []struct {
		name       string
		exceptions []any
		wantDup    bool
	}{
		{"one entry per name", []any{exception("fpex-a", 3), exception("fpex-b", 3)}, false},
		{"an exception listed twice", []any{exception("fpex-a", 3), exception("fpex-b", 1), exception("fpex-a", 1)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{"spec": map[string]any{"cluster": "c", "exceptions": tt.exceptions}}
			errs := listtype.ValidateListSetsAndMaps(nil, s, obj)
			if got := len(errs) > 0; got != tt.wantDup {
				t.Errorf("refused %v (%v), want %v", got, errs, tt.wantDup)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// summaryCRD is the generated PolicyReportSummary CRD's schema.
func summaryCRD(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, crd := range generatedCRDs(t) {
		if crd.Spec.Names.Kind == "PolicyReportSummary" {
			return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		}
	}
	t.Fatal("no PolicyReportSummary CRD in config/crd")
	return apiextensionsv1.JSONSchemaProps{}
}

// schemaAt is the schema at a dotted path; "[]" steps into a list's items.
func schemaAt(t *testing.T, root apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := root
	for _, step := range strings.Split(path, ".") {
		if step == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%s: not a list before %q", path, step)
			}
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[step]
		if !ok {
			t.Fatalf("%s: no property %q", path, step)
		}
		s = next
	}
	return s
}

// An agent speaks only for its cluster: the apiserver refuses a summary under another name than
// SummaryName, a negative count (it would cancel other clusters' failures in a rollout wave's
// sum), a policy or application listed twice (duplicate metric series), and any string without
// a bound.
func TestSummaryCRDRefusesWhatAgentsMustNotSay(t *testing.T) {
	root := summaryCRD(t)
	named := false
	for _, v := range root.XValidations {
		if v.Rule == "self.metadata.name == '"+SummaryName+"'" && strings.Contains(v.Message, "metadata.name") {
			named = true
		}
	}
	if !named {
		t.Errorf("no root rule refusing names other than %q (with a message naming metadata.name): %+v", SummaryName, root.XValidations)
	}

	spec := root.Properties["spec"]
	if fail := schemaAt(t, spec, "totals.fail"); fail.Minimum == nil || *fail.Minimum != 0 {
		t.Errorf("spec.totals.fail minimum %v, want 0", fail.Minimum)
	}
	// Every count, every string: walked, so a field added later cannot forget its bound.
	var walk func(path string, s apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
		switch s.Type {
		case "integer":
			if s.Minimum == nil || *s.Minimum < 0 {
				t.Errorf("%s: a count without minimum 0", path)
			}
		case "string":
			if s.MaxLength == nil && s.Format != "date-time" && len(s.Enum) == 0 {
				t.Errorf("%s: a string without maxLength", path)
			}
		case "array":
			if s.MaxItems == nil {
				t.Errorf("%s: a list without maxItems", path)
			}
		}
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", *s.Items.Schema)
		}
	}
	walk("spec", spec)

	for _, list := range []struct {
		path string
		keys []string
	}{
		{"policies", []string{"name", "namespace", "kind"}},
		{"applications", []string{"namespace", "name", "policy"}},
		{"namespaces", []string{"namespace"}},
		{"exceptions", []string{"name"}},
	} {
		s := schemaAt(t, spec, list.path)
		if s.XListType == nil || *s.XListType != "map" || !slices.Equal(s.XListMapKeys, list.keys) {
			t.Errorf("spec.%s: list type %v keyed by %v, want map keyed by %v", list.path, s.XListType, s.XListMapKeys, list.keys)
		}
	}
	if _, ok := root.Properties["status"].Properties["observedTime"]; !ok {
		t.Error("status.observedTime is missing: the hub's clock judges freshness")
	}
}

// The Go bounds Validate checks are the CRD's.
func TestSummaryBoundsMatchTheCRD(t *testing.T) {
	spec := summaryCRD(t).Properties["spec"]
	for path, want := range map[string]int{
		"cluster":                            MaxSummaryNameLength,
		"contentHash":                        MaxSummaryHashLength,
		"engine.reportAPIs.[]":               MaxSummaryRefLength,
		"policies.[].name":                   MaxSummaryNameLength,
		"policies.[].namespace":              MaxSummaryNamespaceLength,
		"policies.[].kind":                   MaxSummaryKindLength,
		"policies.[].title":                  MaxSummaryTitleLength,
		"policies.[].category":               MaxSummaryCategoryLength,
		"policies.[].severity":               MaxSummarySeverityLength,
		"policies.[].lastBlocked.message":    MaxSummaryMessageLength,
		"applications.[].namespace":          MaxSummaryNamespaceLength,
		"applications.[].name":               MaxSummaryNameLength,
		"applications.[].policy":             MaxSummaryRefLength,
		"namespaces.[].namespace":            MaxSummaryNamespaceLength,
		"violations.[].cluster":              MaxSummaryNameLength,
		"violations.[].policy":               MaxSummaryRefLength,
		"violations.[].rule":                 MaxSummaryRuleLength,
		"violations.[].severity":             MaxSummarySeverityLength,
		"violations.[].message":              MaxSummaryMessageLength,
		"violations.[].resource.apiVersion":  MaxSummaryRefLength,
		"violations.[].resource.kind":        MaxSummaryKindLength,
		"violations.[].resource.namespace":   MaxSummaryNamespaceLength,
		"violations.[].resource.name":        MaxSummaryNameLength,
		"exceptions.[].name":                 MaxSummaryNameLength,
		"engine.policyAPIs.[]":               MaxSummaryPolicyAPILength,
		"engine.kyverno.dryRunsNotCounted":   MaxDryRunsNotCountedLength,
		"engine.kyverno.version":             MaxKyvernoVersionLength,
		"engine.kyverno.versionSource":       MaxKyvernoVersionSourceLength,
		"engine.kyverno.exceptionNamespace":  MaxSummaryNamespaceLength,
		"engine.legacy.objects.[].name":      MaxSummaryNameLength,
		"engine.legacy.objects.[].namespace": MaxSummaryNamespaceLength,
	} {
		if got := schemaAt(t, spec, path).MaxLength; got == nil || *got != int64(want) {
			t.Errorf("spec.%s maxLength %v, want %d", path, got, want)
		}
	}
	for path, want := range map[string]int{
		"policies": MaxSummaryPolicies, "applications": MaxSummaryApplications, "namespaces": MaxSummaryNamespaces,
		"violations": MaxSummaryViolations, "engine.reportAPIs": MaxSummaryReportAPIs,
		"exceptions":        MaxSummaryExceptions,
		"engine.policyAPIs": MaxSummaryPolicyAPIs, "engine.legacy.counts": MaxLegacyCounts, "engine.legacy.objects": MaxLegacyNames,
		"engine.kyverno.reportedResults": len(reportedResultKinds),
	} {
		if got := schemaAt(t, spec, path).MaxItems; got == nil || *got != int64(want) {
			t.Errorf("spec.%s maxItems %v, want %d", path, got, want)
		}
	}
	// Validate refuses an exception or a legacy object without a name, as the CRD does.
	for _, path := range []string{"exceptions.[].name", "engine.legacy.objects.[].name"} {
		if got := schemaAt(t, spec, path).MinLength; got == nil || *got != 1 {
			t.Errorf("spec.%s minLength %v, want 1", path, got)
		}
	}
	// And its version pattern is the CRD's.
	if got := schemaAt(t, spec, "engine.kyverno.version").Pattern; got != kyvernoVersionPattern.String() {
		t.Errorf("spec.engine.kyverno.version pattern %q, Validate's %q", got, kyvernoVersionPattern)
	}
}

// The hub reads summaries with typed clients: one value the CRD admits but Go cannot decode
// (a date-time with a lowercase t, which the apiserver's date-time format allows, or a duration
// Go cannot parse) would make the hub's whole list of summaries undecodable, every cluster's
// results with it. The CRD's patterns admit only what Go decodes.
func TestSummaryTimesAndDurationsDecodeInGo(t *testing.T) {
	spec := summaryCRD(t).Properties["spec"]
	pattern := func(path string) *regexp.Regexp {
		p := schemaAt(t, spec, path).Pattern
		if p == "" {
			t.Fatalf("spec.%s has no pattern", path)
		}
		return regexp.MustCompile(p)
	}
	decodes := func(into json.Unmarshaler, s string) bool {
		return into.UnmarshalJSON([]byte(strconv.Quote(s))) == nil
	}
	times := []struct {
		value string
		ok    bool
	}{
		{"2026-01-02T03:04:05Z", true},
		{"2026-01-02T03:04:05.123456789+02:00", true},
		{"2026-12-31T23:59:59-23:59", true},
		{"2026-01-02t03:04:05z", false},
		{"2026-01-02T03:04:05z", false},
		{"2026-01-02T03:04:05+25:00", false},
		{"2026-01-02T03:04:05", false},
		{"2026-01-02T24:00:00Z", false},
		{"2026-01-02 03:04:05Z", false},
	}
	for _, path := range []string{"generatedAt", "policies.[].oldestResult", "policies.[].lastBlocked.time", "violations.[].timestamp"} {
		re := pattern(path)
		for _, tt := range times {
			if got := re.MatchString(tt.value); got != tt.ok {
				t.Errorf("spec.%s: pattern admits %q: %v, want %v", path, tt.value, got, tt.ok)
			}
			if tt.ok && !decodes(&metav1.Time{}, tt.value) {
				t.Errorf("spec.%s: %q admitted but metav1.Time cannot decode it", path, tt.value)
			}
		}
		if now, _ := metav1.Now().MarshalJSON(); !re.MatchString(strings.Trim(string(now), `"`)) {
			t.Errorf("spec.%s: the pattern refuses what metav1.Time writes: %s", path, now)
		}
	}
	re := pattern("heartbeatInterval")
	for _, tt := range []struct {
		value string
		ok    bool
	}{
		{"1m0s", true}, {"10s", true}, {"1h0m0s", true}, {"500ms", true}, {"1.5s", true}, {"0s", true}, {"99999h99999m99999.999999999s", true},
		{"", false}, {"forever", false}, {"1d", false}, {"-1m", false}, {"999999h", false}, {"1m1m", false}, {"1s1h", false},
	} {
		if got := re.MatchString(tt.value); got != tt.ok {
			t.Errorf("spec.heartbeatInterval: pattern admits %q: %v, want %v", tt.value, got, tt.ok)
		}
		if tt.ok && !decodes(&metav1.Duration{}, tt.value) {
			t.Errorf("spec.heartbeatInterval: %q admitted but metav1.Duration cannot decode it", tt.value)
		}
	}
	for _, d := range []time.Duration{time.Minute, 10 * time.Second, 90 * time.Minute, 1500 * time.Millisecond} {
		if !re.MatchString(d.String()) {
			t.Errorf("spec.heartbeatInterval: the pattern refuses what metav1.Duration writes: %s", d)
		}
	}
}
