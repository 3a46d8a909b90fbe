package work

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kyverno reads PolicyExceptions only when its processes run with --enablePolicyException, and
// only from the namespace --exceptionNamespace names. Nothing in the cluster's API says how they
// run; Kyverno's exception webhooks say it, as warnings, to every write of an exception. Before a
// declaration's exceptions are written (created, changed, restored), one dry-run apply of each
// asks (it persists nothing), so that an exception Kyverno would ignore is Unsupported with the
// reason instead of Synced. One already in place is not asked about again until it is written.

// kyvernoExceptionWarnings are the warnings of Kyverno 1.19's exception webhooks
// (pkg/validation/exception), each with what it means for an exception the hub writes.
var kyvernoExceptionWarnings = []struct{ warning, means string }{
	{"PolicyException resources would not be processed until it is enabled.",
		"its Kyverno runs without --enablePolicyException (Helm: features.policyExceptions.enabled: true)"},
	{"The exceptionNamespace flag is not set",
		"its Kyverno has exceptions enabled but no --exceptionNamespace, so it reads no kyverno.io PolicyException (Helm: features.policyExceptions.namespace: %[1]s)"},
	{"PolicyException resource namespace must match the defined namespace.",
		"its Kyverno reads PolicyExceptions from another namespace than %[1]s (--exceptionNamespace; Helm: features.policyExceptions.namespace): set it to %[1]s, or label the cluster policyhub.io/kyverno-exception-namespace with the namespace it reads"},
}

// isKyvernoException says whether obj is one of Kyverno's PolicyException kinds.
func isKyvernoException(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Kind == "PolicyException" && (gvk.Group == "kyverno.io" || gvk.Group == "policies.kyverno.io")
}

// kyvernoIgnoresExceptions says why Kyverno in the cluster would ignore the exceptions among objs
// ("" when it reads them, or when it cannot tell: a dry-run that fails is left to the write,
// which reports its own error).
func (s *Syncer) kyvernoIgnoresExceptions(ctx context.Context, cc *clusterClients, cluster string, objs []*unstructured.Unstructured) string {
	for _, obj := range objs {
		if !isKyvernoException(obj) {
			continue
		}
		wctx, w := collectingWarnings(ctx)
		if _, err := Apply(wctx, cc.client, obj, nil, true); err != nil {
			continue
		}
		if why := ignoredException(cluster, obj.GetNamespace(), w.all()); why != "" {
			return why
		}
	}
	return ""
}

// ignoredException reads Kyverno's warnings to the write of an exception in namespace: why
// Kyverno in the cluster would ignore it, or "".
func ignoredException(cluster, namespace string, warnings []string) string {
	for _, k := range kyvernoExceptionWarnings {
		if slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, k.warning) }) {
			return fmt.Sprintf("cluster %s would ignore this exception: %s; nothing was sent (Kyverno: %q)",
				cluster, fmt.Sprintf(k.means, namespace), k.warning)
		}
	}
	return ""
}
