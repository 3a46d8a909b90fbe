package declare

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// Kyverno 1.19 takes an exception of a Namespaced* CEL policy in or out only when the policy
// itself changes (kyverno#17605). The FleetPolicy or PolicySet shipping such a policy marks it,
// in each cluster, with the exceptions in force from it there (render.WithExceptionsInForce),
// read from the exceptions' ClusterStatusSlices: the mark changes, and the policy is written,
// only once an exception is written to or removed from that cluster. The hub and
// `kubectl policyhub sync --dry-run` both mark: a preview without the marks would plan them away.

// MarkExceptionsInForce marks the declaration's (kind/name) namespaced CEL policies in t with the
// exceptions from them synced in each cluster; policyOf names the policy an exception of the
// declaration exempts from (render.PolicyRef). The exceptions' slices alone say where they are:
// an exception's status is written after its slices, and an exception that ends leaves a cluster's
// slice only once it is removed from it. Nothing is read when t holds no such policy. reader may
// be the hub's cache (its objects are not copied, nor changed here) or the API.
func MarkExceptionsInForce(ctx context.Context, reader client.Reader, kind, name string, policyOf func(*policyhubv1.ExceptionTarget) string, t *render.Targets) error {
	missing := false
	for _, objs := range t.Objects {
		if slices.ContainsFunc(objs, render.MissesExceptionEvents) {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	list := &policyhubv1.FleetPolicyExceptionList{}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list FleetPolicyExceptions: %w", err)
	}
	inForce := map[string]map[string][]string{}
	for i := range list.Items {
		ex := &list.Items[i]
		if ex.Spec.Target.Kind != kind || ex.Spec.Target.Name != name {
			continue
		}
		policy := policyOf(&ex.Spec.Target)
		clusters, _, err := statusslice.Read(ctx, reader, statusslice.Owner{
			Kind: policyhubv1.KindFleetPolicyException, Name: ex.Name, UID: string(ex.UID), Namespace: ex.Namespace})
		if err != nil {
			return err
		}
		for _, c := range SyncedIn(clusters) {
			if inForce[c] == nil {
				inForce[c] = map[string][]string{}
			}
			inForce[c][policy] = append(inForce[c][policy], policyhubv1.ExceptionObjectName(ex.Namespace, ex.Name))
		}
	}
	return render.WithExceptionsInForce(t, inForce)
}

// SyncedIn are the clusters among a declaration's states where it is Synced.
func SyncedIn(clusters []policyhubv1.ClusterStatus) []string {
	var out []string
	for _, c := range clusters {
		if c.Phase == policyhubv1.ClusterPhaseSynced {
			out = append(out, c.Name)
		}
	}
	return out
}

// FleetPolicyExceptedRef names the policy a FleetPolicy's exception exempts from: its template's.
func FleetPolicyExceptedRef(fp *policyhubv1.FleetPolicy) func(*policyhubv1.ExceptionTarget) string {
	return func(*policyhubv1.ExceptionTarget) string {
		tmpl := fp.Spec.Template
		name := tmpl.Metadata.Name
		if name == "" {
			name = fp.Name
		}
		return render.ExceptedPolicy{Kind: tmpl.Kind, Namespace: tmpl.Metadata.Namespace, Name: name}.Ref()
	}
}

// MemberExceptedRef names the policy a PolicySet's exception exempts from: its target member.
func MemberExceptedRef(target *policyhubv1.ExceptionTarget) string {
	if target.Member == nil {
		return ""
	}
	return render.ExceptedPolicy{Kind: target.Member.Kind, Namespace: target.Member.Namespace, Name: target.Member.Name}.Ref()
}
