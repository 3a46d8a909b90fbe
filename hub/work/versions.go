package work

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Render for the cluster's Kyverno: a policies.kyverno.io object is sent at the API version the
// cluster serves for its kind, v1 (Kyverno 1.17 and later) where served, else v1beta1 (Kyverno
// 1.16 serves the CEL kinds only as v1alpha1 and v1beta1). Within one Kyverno release the two
// versions have the same schema (checked on 1.16.3's and 1.19.1's CRDs; the CRDs convert with
// strategy None), so the content is sent unchanged. One version per kind and cluster, whichever
// the declaration was written in: the hub reads, watches and compares a kind at one version, and
// a v1beta1 template next to a v1 one would otherwise never compare equal to what the cluster
// returns. v1alpha1 (deprecated, another shape in some kinds) is sent as written.
//
// A field Kyverno 1.16's v1beta1 lacks (one added later) cannot be sent there: the declaration is
// Unsupported in that cluster, naming the field, and nothing of it is sent.

// celGroup is the group of Kyverno's CEL policy kinds and their PolicyException.
const celGroup = "policies.kyverno.io"

// celVersions are the versions the hub renders between, in order of preference.
var celVersions = []string{"v1", "v1beta1"}

// missingIn116 are the fields of the policies.kyverno.io kinds (as of Kyverno 1.19's v1) that
// Kyverno 1.16's v1beta1 does not have, by kind: the difference of the two CRDs' schemas, status
// left out. "[]" steps into a list's items. The Namespaced{Mutating,Generating}Policy kinds do not
// exist in 1.16 at all (the capability check says so).
var missingIn116 = map[string][]string{
	"GeneratingPolicy": {"spec.auditAnnotations", "spec.evaluation.skipBackgroundRequests", "spec.generate[].template", "spec.useServerSideApply"},
	"ImageValidatingPolicy": {"spec.attestors[].cosign.keyless.additionalExtensions",
		"spec.attestors[].cosign.keyless.identities[].subjectExpression", "spec.attestors[].cosign.trustedRoot"},
	"NamespacedImageValidatingPolicy": {"spec.attestors[].cosign.keyless.additionalExtensions",
		"spec.attestors[].cosign.keyless.identities[].subjectExpression", "spec.attestors[].cosign.trustedRoot"},
	// 1.16's v1beta1 mutations are {expression, target}; 1.17 replaced them by the shape below.
	"MutatingPolicy": {"spec.auditAnnotations", "spec.evaluation.skipBackgroundRequests", "spec.evaluation.useServerSideApply",
		"spec.mutations[].applyConfiguration", "spec.mutations[].jsonPatch", "spec.mutations[].patchType",
		"spec.targetMatchConditions", "spec.targetMatchConstraints.expression"},
	"PolicyException": {"spec.evaluationMode", "spec.expiresAt", "spec.properties"},
}

// servedVersions returns objs as the cluster takes them, nil when that is as they are: each
// policies.kyverno.io object written as v1 or v1beta1 at the version mapper says the cluster
// serves for its kind (a copy; objs are shared by every cluster and never changed). unsupported
// says why the cluster cannot take them ("" when it can): a field its version lacks. A kind served
// at neither version is left as written, for the capability check to report.
func servedVersions(mapper meta.RESTMapper, cluster string, objs []*unstructured.Unstructured) (adapted []*unstructured.Unstructured, unsupported string, err error) {
	chosen := map[schema.GroupKind]string{}
	for i, obj := range objs {
		gvk := obj.GroupVersionKind()
		if gvk.Group != celGroup || !slices.Contains(celVersions, gvk.Version) {
			continue
		}
		version, known := chosen[gvk.GroupKind()]
		if !known {
			if version, err = servedVersion(mapper, gvk.GroupKind()); err != nil {
				return nil, "", err
			}
			chosen[gvk.GroupKind()] = version
		}
		if version == "" {
			continue // served at neither: left to the capability check
		}
		// v1beta1 chosen means v1 is not served: Kyverno 1.16.
		if version == "v1beta1" {
			if fields := lacking(obj, missingIn116[gvk.Kind]); len(fields) > 0 {
				return nil, lackingMessage(cluster, gvk.Kind, fields), nil
			}
		}
		if version == gvk.Version {
			continue
		}
		if adapted == nil {
			adapted = slices.Clone(objs)
		}
		adapted[i] = obj.DeepCopy()
		adapted[i].SetAPIVersion(celGroup + "/" + version)
	}
	return adapted, "", nil
}

// servedVersion is the first of celVersions the cluster serves gk at, "" when none.
func servedVersion(mapper meta.RESTMapper, gk schema.GroupKind) (string, error) {
	for _, version := range celVersions {
		_, err := mapper.RESTMapping(gk, version)
		if err == nil {
			return version, nil
		}
		if !meta.IsNoMatchError(err) {
			return "", err
		}
	}
	return "", nil
}

// servedGVK is gvk as servedVersions sends it to the cluster: what to read the cluster's objects
// of a declaration at.
func servedGVK(mapper meta.RESTMapper, gvk schema.GroupVersionKind) schema.GroupVersionKind {
	if gvk.Group != celGroup || !slices.Contains(celVersions, gvk.Version) {
		return gvk
	}
	if version, err := servedVersion(mapper, gvk.GroupKind()); err == nil && version != "" {
		gvk.Version = version
	}
	return gvk
}

// lacking returns the fields of paths that obj sets.
func lacking(obj *unstructured.Unstructured, paths []string) []string {
	var set []string
	for _, p := range paths {
		if hasPath(obj.Object, strings.Split(p, ".")) {
			set = append(set, p)
		}
	}
	return set
}

// hasPath says whether v holds the path, a step "x[]" meaning field x, a list any of whose items
// holds the rest.
func hasPath(v any, steps []string) bool {
	if len(steps) == 0 {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	name, list := strings.CutSuffix(steps[0], "[]")
	next, found := m[name]
	if !found {
		return false
	}
	if !list {
		return hasPath(next, steps[1:])
	}
	items, ok := next.([]any)
	if !ok {
		return false
	}
	return slices.ContainsFunc(items, func(item any) bool { return hasPath(item, steps[1:]) })
}

// lackingMessage says which fields the cluster's Kyverno (1.16: it serves the kind only as
// v1beta1) has not, and what to do.
func lackingMessage(cluster, kind string, fields []string) string {
	return fmt.Sprintf("cluster %s serves %s %s only as v1beta1 (Kyverno 1.16), which has no field %s: "+
		"upgrade its Kyverno to a version that has it, or leave the field out; nothing was sent",
		cluster, celGroup, kind, strings.Join(fields, ", "))
}

// forServedVersions is servedVersions for each declaration: decls as the cluster takes them (a
// copy once one changes; decls is the caller's), and for each why the cluster cannot take it, a
// message or a discovery error.
func forServedVersions(mapper meta.RESTMapper, cluster string, decls []Declaration) (out []Declaration, unsupported []string, errs []error) {
	out, unsupported, errs = decls, make([]string, len(decls)), make([]error, len(decls))
	copied := false
	for i, d := range decls {
		adapted, message, err := servedVersions(mapper, cluster, d.Objects)
		unsupported[i], errs[i] = message, err
		if adapted == nil || message != "" || err != nil {
			continue
		}
		if !copied {
			out, copied = slices.Clone(decls), true
		}
		out[i].Objects = adapted
	}
	return out, unsupported, errs
}
