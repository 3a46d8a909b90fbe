package app

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// previewableKinds are the kinds a shadow can be made of (render.Shadow), by group.
var previewableKinds = map[string][]string{
	"kyverno.io":          {"ClusterPolicy", "Policy"},
	"policies.kyverno.io": {"ValidatingPolicy", "NamespacedValidatingPolicy"},
}

// previewableKindsText names them in a sentence.
const previewableKindsText = "a kyverno.io ClusterPolicy or Policy, or a policies.kyverno.io ValidatingPolicy or NamespacedValidatingPolicy"

// previewable says whether an object of apiVersion and kind can be previewed.
func previewable(apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && slices.Contains(previewableKinds[gv.Group], kind)
}

// maxNamedObjects bounds the objects an error about -f names.
const maxNamedObjects = 5

// readCandidate reads the one Kyverno policy in file (a file, a directory or - for stdin) as the
// template spec.preview holds: its apiVersion, kind, name, namespace, labels, annotations (but
// kubectl's last-applied-configuration) and spec.
func readCandidate(file string, stdin io.Reader) (policyhubv1.PolicyTemplate, error) {
	objs, err := checkRead([]string{file}, stdin)
	if err != nil {
		return policyhubv1.PolicyTemplate{}, err
	}
	switch len(objs) {
	case 0:
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: no object found: give one Kyverno policy to preview (%s)", file, previewableKindsText)}
	case 1:
	default:
		var found []string
		for _, obj := range objs[:min(len(objs), maxNamedObjects)] {
			found = append(found, objectText(obj))
		}
		if len(objs) > maxNamedObjects {
			found = append(found, fmt.Sprintf("and %d more", len(objs)-maxNamedObjects))
		}
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s holds %d objects (%s): a preview takes one Kyverno policy", file, len(objs), strings.Join(found, ", "))}
	}
	obj := objs[0]
	if !previewable(obj.GetAPIVersion(), obj.GetKind()) {
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: %s cannot be previewed: a preview's candidate is %s", file, objectText(obj), previewableKindsText)}
	}
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: %s has no spec", file, objectText(obj))}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return policyhubv1.PolicyTemplate{}, fmt.Errorf("-f %s: %s: spec: %w", file, objectText(obj), err)
	}
	annotations := maps.Clone(obj.GetAnnotations())
	delete(annotations, "kubectl.kubernetes.io/last-applied-configuration")
	if len(annotations) == 0 {
		annotations = nil
	}
	return policyhubv1.PolicyTemplate{
		APIVersion: obj.GetAPIVersion(),
		Kind:       obj.GetKind(),
		Metadata: policyhubv1.TemplateMetadata{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: annotations,
		},
		Spec: &runtime.RawExtension{Raw: raw},
	}, nil
}

// objectText names an object read from a file: apiVersion Kind namespace/name.
func objectText(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetAPIVersion() + " " + obj.GetKind() + " " + name
}

// templateText names a template: Kind/name (the FleetPolicy's name when it has none).
func templateText(t policyhubv1.PolicyTemplate, fleetPolicy string) string {
	return t.Kind + "/" + cmp.Or(t.Metadata.Name, fleetPolicy)
}
