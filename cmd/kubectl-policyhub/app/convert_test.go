package app

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// kyvernoPolicy is a legacy policy of kyverno/policies, as the converter's tests hold it.
func kyvernoPolicy(name string) string {
	return "../../../hub/render/tocel/testdata/kyverno-policies/" + name + "/" + name + ".yaml"
}

// convert -f prints the converted policies as YAML documents and says, on standard error, which
// converted and why the others did not; it exits 1 when any was not converted.
func TestConvertFiles(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     []string
		stdin     string
		code      int
		kinds     []string
		stderrHas []string
	}{
		{name: "one converts", files: []string{kyvernoPolicy("require-labels")}, code: ExitOK,
			kinds: []string{"ValidatingPolicy"}, stderrHas: []string{"ClusterPolicy/require-labels: converted"}},
		{name: "one refused, one converted", files: []string{kyvernoPolicy("allowed-pod-priorities"), kyvernoPolicy("disallow-latest-tag")}, code: ExitFindings,
			kinds:     []string{"ValidatingPolicy"},
			stderrHas: []string{"ClusterPolicy/allowed-podpriorities: not converted", "context configMap", "ClusterPolicy/disallow-latest-tag: converted; note:", "legacy: skip", "1 of 2 policies not converted"}},
		{name: "not a legacy policy", stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", files: []string{"-"}, code: ExitError,
			stderrHas: []string{"error: ", "is not a kyverno.io/v1 ClusterPolicy or Policy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"convert"}
			for _, f := range tc.files {
				args = append(args, "-f", f)
			}
			var out, errOut bytes.Buffer
			code := Run(t.Context(), args, Streams{In: strings.NewReader(tc.stdin), Out: &out, ErrOut: &errOut})
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
			var kinds []string
			for _, doc := range strings.Split(out.String(), "\n---\n") {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				var obj struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
					Spec       struct {
						ValidationActions []string         `json:"validationActions"`
						Validations       []map[string]any `json:"validations"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("stdout is not YAML documents: %v\n%s", err, out.String())
				}
				if obj.APIVersion != "policies.kyverno.io/v1" || len(obj.Spec.ValidationActions) == 0 || len(obj.Spec.Validations) == 0 {
					t.Errorf("converted object %+v: want a policies.kyverno.io/v1 policy with validations and its actions", obj)
				}
				kinds = append(kinds, obj.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("printed kinds %v, want %v", kinds, tc.kinds)
			}
			for _, want := range tc.stderrHas {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
		})
	}
}

// convert needs exactly one of -f and --fleetpolicy.
func TestConvertUsage(t *testing.T) {
	if _, err := os.Stat(kyvernoPolicy("require-labels")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"convert"}, {"convert", "-f", kyvernoPolicy("require-labels"), "--fleetpolicy", "x"}, {"convert", "extra"}} {
		var out, errOut bytes.Buffer
		if code := Run(t.Context(), args, Streams{Out: &out, ErrOut: &errOut}); code != ExitError || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and nothing printed", args, code, out.String(), errOut.String())
		}
	}
}

// A FleetPolicy's template converts under the name the hub gives its object in the clusters:
// the template's own name when set, else the FleetPolicy's.
func TestConvertTemplateObjectName(t *testing.T) {
	spec := []byte(`{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"validate":{"pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`)
	for _, tc := range []struct{ templateName, want string }{{"", "fp"}, {"in-cluster", "in-cluster"}} {
		fp := &policyhubv1.FleetPolicy{}
		fp.Name = "fp"
		fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
			Metadata: policyhubv1.TemplateMetadata{Name: tc.templateName}, Spec: &runtime.RawExtension{Raw: spec}}
		obj, err := templateObject(fp)
		if err != nil {
			t.Fatal(err)
		}
		p, err := convertOne(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Converted || p.Policy != "ClusterPolicy/"+tc.want {
			t.Errorf("template name %q: converted %v as %q, want ClusterPolicy/%s (refusals %v)", tc.templateName, p.Converted, p.Policy, tc.want, p.Refusals)
		}
	}
}
