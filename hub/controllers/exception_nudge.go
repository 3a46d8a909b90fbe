package controllers

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// Kyverno 1.19 takes an exception of a Namespaced* CEL policy in or out only when the policy
// itself changes (kyverno#17605). The FleetPolicy or PolicySet shipping such a policy marks it,
// in each cluster, with the exceptions in force from it there (render.WithExceptionsInForce),
// read from the exceptions' ClusterStatusSlices: the mark changes, and the policy is written,
// only once an exception is written to or removed from that cluster.

// markExceptionsInForce marks the declaration's (kind/name) namespaced CEL policies in t with the
// exceptions from them synced in each cluster; policyOf names the policy an exception of the
// declaration exempts from (render.PolicyRef). The exceptions' slices alone say where they are:
// an exception's status is written after its slices, and an exception that ends leaves a cluster's
// slice only once it is removed from it. Nothing is read when t holds no such policy.
func markExceptionsInForce(ctx context.Context, reader client.Reader, kind, name string, policyOf func(*policyhubv1.ExceptionTarget) string, t *render.Targets) error {
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
	if err := reader.List(ctx, list, readOnlyList); err != nil {
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
		for _, c := range syncedIn(clusters) {
			if inForce[c] == nil {
				inForce[c] = map[string][]string{}
			}
			inForce[c][policy] = append(inForce[c][policy], policyhubv1.ExceptionObjectName(ex.Namespace, ex.Name))
		}
	}
	return render.WithExceptionsInForce(t, inForce)
}

// ofExceptionSlice maps an exception's ClusterStatusSlice to the declaration of kind its
// exception exempts from (every declaration of the kind, every, when the exception is gone).
func ofExceptionSlice(reader client.Reader, kind string, every handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		s, ok := obj.(*policyhubv1.ClusterStatusSlice)
		if !ok || s.Declaration.Kind != policyhubv1.KindFleetPolicyException {
			return nil
		}
		ex := &policyhubv1.FleetPolicyException{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Declaration.Name}, ex); err != nil {
			if apierrors.IsNotFound(err) {
				return every(ctx, obj)
			}
			log.FromContext(ctx).Error(err, "read the exception of a ClusterStatusSlice", "slice", client.ObjectKeyFromObject(s))
			return nil
		}
		if ex.Spec.Target.Kind != kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: ex.Spec.Target.Name}}}
	}
}
