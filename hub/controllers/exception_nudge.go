package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The FleetPolicy or PolicySet shipping a Namespaced* CEL policy marks it with the exceptions in
// force from it (declare.MarkExceptionsInForce); an exception's slices changing wake it here.

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
