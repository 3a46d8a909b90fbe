package v1alpha1

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	if err != nil || len(files) != 4 {
		t.Fatalf("want the 4 generated CRDs in config/crd, found %v (%v)", files, err)
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

// The declarations' status.clusters holds MaxClusters entries: the CRDs' MaxItems (a marker,
// which cannot name the constant) must say the same, or a placement the hub accepts could not
// have its status written.
func TestStatusClustersHoldMaxClusters(t *testing.T) {
	checked := 0
	for _, crd := range generatedCRDs(t) {
		for _, version := range crd.Spec.Versions {
			status, ok := version.Schema.OpenAPIV3Schema.Properties["status"]
			if !ok {
				continue
			}
			clusters, ok := status.Properties["clusters"]
			if !ok {
				continue
			}
			checked++
			if clusters.MaxItems == nil || *clusters.MaxItems != MaxClusters {
				t.Errorf("%s %s: status.clusters maxItems = %v, want MaxClusters (%d)", crd.Name, version.Name, clusters.MaxItems, MaxClusters)
			}
		}
	}
	if checked != 2 {
		t.Errorf("found status.clusters in %d CRDs, want 2 (FleetPolicy, ApplicationPolicy)", checked)
	}
}
