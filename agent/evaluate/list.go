package evaluate

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Reading the cluster: every list is paged (pageSize objects a request) and stops at its bound;
// what was left is counted, never read. A page the server sends with more items than asked is
// cut to the page size (a hostile or broken server is not trusted to page).

// paged lists with list until max items were taken or the list ends; it says whether items
// were left. take is given each item; items is how many items a page holds.
func paged(ctx context.Context, pageSize int64, max int, list func(ctx context.Context, o metav1.ListOptions) (items int, next string, err error)) (more bool, err error) {
	o := metav1.ListOptions{Limit: pageSize}
	taken := 0
	for {
		if rest := int64(max - taken); rest < o.Limit {
			o.Limit = rest + 1 // one more tells whether something was left
		}
		n, next, err := list(ctx, o)
		if err != nil {
			return false, err
		}
		taken += n
		if taken > max {
			return true, nil
		}
		if next == "" {
			return false, nil
		}
		if taken == max {
			return true, nil
		}
		o.Continue = next
	}
}

// pagedItems lists with list, a page at a time, and gives keep each item until max were given;
// it says whether items were left. A page with more items than asked is cut to the page size.
func pagedItems[T any](ctx context.Context, pageSize int64, max int, list func(context.Context, metav1.ListOptions) ([]T, string, error), keep func(*T)) (more bool, err error) {
	given := 0
	return paged(ctx, pageSize, max, func(ctx context.Context, o metav1.ListOptions) (int, string, error) {
		items, next, err := list(ctx, o)
		if err != nil {
			return 0, "", err
		}
		items = items[:min(int64(len(items)), o.Limit)]
		for i := range items {
			if given < max {
				given++
				keep(&items[i])
			}
		}
		return len(items), next, nil
	})
}

// listPolicies reads at most max ValidatingAdmissionPolicies.
func listPolicies(ctx context.Context, c kubernetes.Interface, pageSize int64, max int) (out []*admissionregistrationv1.ValidatingAdmissionPolicy, more bool, err error) {
	more, err = pagedItems(ctx, pageSize, max, func(ctx context.Context, o metav1.ListOptions) ([]admissionregistrationv1.ValidatingAdmissionPolicy, string, error) {
		l, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, o)
		if err != nil {
			return nil, "", fmt.Errorf("list ValidatingAdmissionPolicies: %w", err)
		}
		return l.Items, l.Continue, nil
	}, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { out = append(out, p) })
	return out, more, err
}

// listBindings reads at most max ValidatingAdmissionPolicyBindings.
func listBindings(ctx context.Context, c kubernetes.Interface, pageSize int64, max int) (out []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, more bool, err error) {
	more, err = pagedItems(ctx, pageSize, max, func(ctx context.Context, o metav1.ListOptions) ([]admissionregistrationv1.ValidatingAdmissionPolicyBinding, string, error) {
		l, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, o)
		if err != nil {
			return nil, "", fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
		}
		return l.Items, l.Continue, nil
	}, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { out = append(out, b) })
	return out, more, err
}

// listNamespaces reads at most max Namespaces, keeping their name and labels (what matching
// and namespaceObject read of them: namespaceObject is the namespace as the API server has it,
// but its spec and status say nothing policies judge by in practice).
func listNamespaces(ctx context.Context, c kubernetes.Interface, pageSize int64, max int) (out []*corev1.Namespace, more bool, err error) {
	more, err = pagedItems(ctx, pageSize, max, func(ctx context.Context, o metav1.ListOptions) ([]corev1.Namespace, string, error) {
		l, err := c.CoreV1().Namespaces().List(ctx, o)
		if err != nil {
			return nil, "", fmt.Errorf("list Namespaces: %w", err)
		}
		return l.Items, l.Continue, nil
	}, func(ns *corev1.Namespace) {
		out = append(out, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels, Annotations: ns.Annotations},
			Status:     ns.Status})
	})
	return out, more, err
}

// eachObject lists at most max objects of gvr, a page at a time, and gives each to fn: only one
// page is held at once. It says whether objects were left.
func eachObject(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, pageSize int64, max int, fn func(*unstructured.Unstructured)) (more bool, err error) {
	kind := ""
	return pagedItems(ctx, pageSize, max, func(ctx context.Context, o metav1.ListOptions) ([]unstructured.Unstructured, string, error) {
		l, err := c.Resource(gvr).List(ctx, o)
		if err != nil {
			return nil, "", fmt.Errorf("list %s: %w", gvr, err)
		}
		kind = kindOfList(l)
		return l.Items, l.GetContinue(), nil
	}, func(obj *unstructured.Unstructured) {
		if obj.GetAPIVersion() == "" {
			obj.SetGroupVersionKind(gvr.GroupVersion().WithKind(kind))
		}
		fn(obj)
	})
}

// kindOfList is the kind of a list's items: "DeploymentList" → "Deployment".
func kindOfList(l *unstructured.UnstructuredList) string {
	k := l.GetKind()
	if len(k) > 4 && k[len(k)-4:] == "List" {
		return k[:len(k)-4]
	}
	return k
}
