package admission

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The stamping policy tells a change of the spec field by field (the generation is not counted yet
// when mutating admission runs): a spec field it did not compare would let another writer change
// it without being listed in spec.changedBy. The validating policy would then refuse the change,
// so a field missing here breaks writes, not the fence; this test catches it first.
func TestRequesterStampComparesEverySpecField(t *testing.T) {
	data, err := os.ReadFile("exceptions-requester-stamp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var specChanged string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj struct {
			Kind string
			Spec struct {
				Variables []struct{ Name, Expression string }
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		for _, v := range obj.Spec.Variables {
			if obj.Kind == "MutatingAdmissionPolicy" && v.Name == "specChanged" {
				specChanged = v.Expression
			}
		}
	}
	if specChanged == "" {
		t.Fatal("no specChanged variable in the MutatingAdmissionPolicy")
	}
	spec := reflect.TypeFor[policyhubv1.FleetPolicyExceptionSpec]()
	for i := range spec.NumField() {
		field, _, _ := strings.Cut(spec.Field(i).Tag.Get("json"), ",")
		if field == "requestedBy" || field == "changedBy" {
			continue
		}
		if want := "object.spec." + field + " != oldObject.spec." + field; !strings.Contains(specChanged, want) {
			t.Errorf("specChanged does not compare spec.%s (%q)", field, want)
		}
	}
}
