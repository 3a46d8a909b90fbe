package v1alpha1

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Each declaration kind's names and scope are its CRD's, and its New and NewList make its types.
func TestDeclarationKindsMatchTheCRDs(t *testing.T) {
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range generatedCRDs(t) {
		crds[crd.Spec.Names.Kind] = crd
	}
	for _, k := range DeclarationKinds() {
		crd := crds[k.Kind]
		if crd == nil {
			t.Errorf("%s: no CRD in config/crd", k.Kind)
			continue
		}
		names := crd.Spec.Names
		if names.Singular != k.Singular || names.Plural != k.Plural || len(names.ShortNames) != 1 || names.ShortNames[0] != k.ShortName {
			t.Errorf("%s: names %s/%s/%s, the CRD's %s/%s/%v", k.Kind, k.Singular, k.Plural, k.ShortName, names.Singular, names.Plural, names.ShortNames)
		}
		if namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped; namespaced != k.Namespaced {
			t.Errorf("%s: namespaced %v, the CRD's scope %s", k.Kind, k.Namespaced, crd.Spec.Scope)
		}
		if obj, list := reflect.TypeOf(k.New()).Elem().Name(), reflect.TypeOf(k.NewList()).Elem().Name(); obj != k.Kind || list != k.Kind+"List" {
			t.Errorf("%s: New makes a %s, NewList a %s", k.Kind, obj, list)
		}
	}
}
