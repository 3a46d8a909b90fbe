package read

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scope is what the user may read: the view reads with their credentials, so their RBAC decides.
type Scope struct {
	// Hidden are the kinds the user may not list (resources as RBAC names them): the pages show
	// nothing of them, and say so.
	Hidden []string
	// Narrowed are the namespaced kinds the user may list only in Namespace.
	Narrowed  []string
	Namespace string
}

// allowedKinds asks the hub, one SelfSubjectAccessReview per kind, which kinds the user may list
// and watch everywhere, else in namespace.
func allowedKinds(ctx context.Context, c client.Client, secretNamespace, namespace string) ([]kind, Scope, error) {
	scope := Scope{Namespace: namespace}
	var kinds []kind
	for _, k := range watchedKinds(secretNamespace) {
		ok, err := mayWatch(ctx, c, k, k.namespace)
		if err != nil {
			return nil, Scope{}, err
		}
		if !ok && k.namespaced && k.namespace == "" && namespace != "" {
			if ok, err = mayWatch(ctx, c, k, namespace); err != nil {
				return nil, Scope{}, err
			}
			if ok {
				k.namespace = namespace
				scope.Narrowed = append(scope.Narrowed, k.name)
			}
		}
		if !ok {
			if !k.optional {
				scope.Hidden = append(scope.Hidden, k.name)
			}
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds, scope, nil
}

func mayWatch(ctx context.Context, c client.Client, k kind, namespace string) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: k.gvk.Group, Resource: k.name, Verb: verb, Namespace: namespace,
			},
		}}
		if err := c.Create(ctx, review); err != nil {
			return false, fmt.Errorf("ask the hub whether you may %s %s: %w", verb, k.name, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
