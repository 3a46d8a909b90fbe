package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Kyverno #17367: in 1.19.0 a PolicyException created as policies.kyverno.io v1/v1beta1 bypassed
// --exceptionNamespace. The fleet runs 1.19.1 as the hub expects it deployed (--exceptionNamespace
// policyhub-system): a policies.kyverno.io v1 or v1beta1 PolicyException made in another
// namespace must not let a resource the policy denies through, while the same exception in
// policyhub-system does (the control: the exception itself is one Kyverno honours). Kyverno
// 1.19.1 scopes its CEL exception lister to the namespace (pkg/cel/engine/exception.go).
func TestKyvernoIgnoresCELExceptionsOutsideTheExceptionNamespace(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	const ns, policy = "kyverno-17367-e2e", "e2e-kyverno-17367"
	var warnings warningRecorder
	cfg := rest.CopyConfig(fleetOf(t).Cluster("cluster-1").Config)
	cfg.WarningHandler = &warnings
	c := directClient(t, cfg)
	createNamespace(ctx, t, c, ns)
	// The exception namespace is the hub's in every cluster (its sync Lease): made if missing, kept.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyhubv1.DefaultExceptionNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}

	vpol := object(t, fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: %s}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  matchConditions:
  - name: test-namespace
    expression: "object.metadata.namespace == '%s'"
  validations:
  - expression: "!object.metadata.name.startsWith('bad-')"
    message: "configmaps named bad-* are not allowed"`, policy, ns))
	if err := c.Create(ctx, vpol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vpol) })
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-one"}}
	deniedEventually(ctx, t, "cluster-1", bad, "Kyverno denies configmap bad-one")

	exception := func(version, namespace string) client.Object {
		return object(t, fmt.Sprintf(`
apiVersion: policies.kyverno.io/%s
kind: PolicyException
metadata: {name: e2e-kyverno-17367-%s, namespace: %s}
spec:
  policyRefs:
  - {kind: ValidatingPolicy, name: %s}
  matchConditions:
  - name: bad-one
    expression: "object.metadata.name == 'bad-one'"`, version, version, namespace, policy))
	}

	// The exception outside the exception namespace, in both API versions #17367 names: created
	// or refused, never honoured.
	for _, version := range []string{"v1", "v1beta1"} {
		outside := exception(version, ns)
		createErr := c.Create(ctx, outside)
		t.Cleanup(func() { _ = c.Delete(context.Background(), outside) })
		t.Logf("create a policies.kyverno.io/%s PolicyException in %s: err=%v, warnings=%q", version, ns, createErr, warnings.all())
	}
	holds(t, 20*time.Second, "Kyverno keeps denying bad-one with the exceptions in "+ns, func() error {
		if err := c.Create(ctx, bad.DeepCopy(), client.DryRunAll); err == nil {
			return fmt.Errorf("admitted: Kyverno honours a policies.kyverno.io exception outside --exceptionNamespace=%s (kyverno#17367)", policyhubv1.DefaultExceptionNamespace)
		} else if !strings.Contains(err.Error(), "configmaps named bad-* are not allowed") {
			return fmt.Errorf("refused, but not by the policy: %v", err)
		}
		return nil
	})

	// The control: the same exception in the exception namespace is honoured.
	inside := exception("v1", policyhubv1.DefaultExceptionNamespace)
	if err := c.Create(ctx, inside); err != nil {
		t.Fatalf("create the exception in %s: %v", policyhubv1.DefaultExceptionNamespace, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), inside) })
	created := time.Now()
	eventually(t, 30*time.Second, 200*time.Millisecond, "Kyverno honours the exception in "+policyhubv1.DefaultExceptionNamespace, func() error {
		return c.Create(ctx, bad.DeepCopy(), client.DryRunAll)
	})
	t.Logf("the exception in %s was honoured %s after its creation", policyhubv1.DefaultExceptionNamespace, time.Since(created).Round(100*time.Millisecond))
}

// warningRecorder keeps the warnings a client's requests are answered with.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
