package work

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// celGeneration is Kyverno's CEL policy kind that takes over from the kyverno.io/v1 kinds.
var celGeneration = schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v1", Kind: "ValidatingPolicy"}

// unsupported says why the cluster cannot take objs ("" when it serves every kind of them), from
// the cluster's discovery: the kinds it does not serve, and what to do about it. pending says the
// cluster will serve them soon (a Constraint kind Gatekeeper there has yet to make from its
// template): retried, not Unsupported.
func (s *Syncer) unsupported(cc *clusterClients, cluster string, objs []*unstructured.Unstructured) (message string, pending bool, err error) {
	mapper := cc.client.RESTMapper()
	serves := func(gvk schema.GroupVersionKind) (bool, error) {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return err == nil, err
	}
	var missing []schema.GroupVersionKind
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if slices.Contains(missing, gvk) {
			continue
		}
		ok, err := serves(gvk)
		if err != nil {
			return "", false, err
		}
		if !ok {
			missing = append(missing, gvk)
		}
	}
	if len(missing) == 0 {
		return "", false, nil
	}
	if !slices.ContainsFunc(missing, func(gvk schema.GroupVersionKind) bool { return !isGatekeeperGroup(gvk.Group) }) {
		var refresh func(string) error
		if cc.mapper != nil {
			refresh = cc.mapper.refresh
		}
		return gatekeeperMissing(cluster, missing, serves, refresh)
	}
	celServed := false
	if slices.ContainsFunc(missing, deprecatedGeneration) {
		var err error
		if celServed, err = serves(celGeneration); err != nil {
			return "", false, err
		}
	}
	return unsupportedMessage(cluster, missing, celServed), false, nil
}

// deprecatedGeneration says whether gvk is one of Kyverno's kyverno.io kinds that Kyverno 1.17
// deprecated in favour of the policies.kyverno.io CEL kinds (and plans to remove in 1.20).
func deprecatedGeneration(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "kyverno.io" && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy")
}

// unsupportedMessage names the kinds the cluster does not serve and what to do. A cluster that
// serves Kyverno's CEL kinds but not the deprecated kyverno.io ones runs a Kyverno without them:
// upgrading it would not help, rewriting the policy in the CEL kinds does.
func unsupportedMessage(cluster string, missing []schema.GroupVersionKind, celServed bool) string {
	names := make([]string, len(missing))
	for i, gvk := range missing {
		names[i] = gvk.GroupVersion().String() + " " + gvk.Kind
	}
	slices.Sort(names)
	what := strings.Join(names, ", ")
	if celServed && slices.ContainsFunc(missing, deprecatedGeneration) {
		return fmt.Sprintf("cluster %s does not serve %s: its Kyverno serves only the CEL policy kinds (kyverno.io/v1 ClusterPolicy and Policy are deprecated since Kyverno 1.17); "+
			"write the policy as a %s %s (in an ApplicationPolicy: spec.validations instead of spec.rules); nothing was sent",
			cluster, what, celGeneration.GroupVersion(), celGeneration.Kind)
	}
	if !slices.ContainsFunc(missing, func(gvk schema.GroupVersionKind) bool { return gvk.Group != policyhubv1.AdmissionGroup }) {
		// Kubernetes' own admission policies: the cluster's API server is the engine.
		return fmt.Sprintf("cluster %s does not serve %s: the Kubernetes engine's admission policies need a newer Kubernetes (ValidatingAdmissionPolicy v1 is served from 1.30, MutatingAdmissionPolicy v1 from 1.36); nothing was sent", cluster, what)
	}
	return fmt.Sprintf("cluster %s does not serve %s: install or upgrade Kyverno to a version that serves it; nothing was sent", cluster, what)
}
