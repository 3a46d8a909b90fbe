package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A tenant's CEL stays in the sandbox: an exception whose condition calls http.Get on a listener
// in the fleet is Invalid, even approved, naming http.Get; no cluster is sent it, the exempted
// Deployment is still denied and the listener is never contacted. ApplicationPolicies whose CEL
// calls http.Get or resource.List, or whose rule verifies manifests, are Stalled naming it and
// dispatch nothing. The control at the end shows the listener was within reach: the fleet's
// Kyverno calls it from a cluster-scoped policy's http.Get, the environment an exception's
// conditions are evaluated in. (Kyverno 1.19.1's own webhooks refuse such an exception and
// http.* in namespaced policies; Kyverno up to 1.19.0 compiles an exception's conditions with
// the policy's libraries. The hub's fence holds for every Kyverno of a fleet.)
func TestTenantCELSandboxed(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, ns = "team-cel", "cel-sandbox-e2e"
	hub := directClient(t, fleetOf(t).Hub.Config)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, ns)
	createNamespace(ctx, t, c1, ns)
	listener := countingListener(t)

	fp := createFleetPolicy(t, noLatestValidatingPolicy("e2e-cel-sandbox", ns))
	waitFleetPolicy(t, fp.Name, "in force in both clusters", allInForce)
	latest := deployment(ns, "web-latest", "nginx:latest")
	deniedEventually(ctx, t, "cluster-1", latest, "Kyverno denies nginx:latest")

	// The tenant asks, an approver approves: the hub refuses it all the same.
	ex := requestException(t, tenantClient(t, tenant, "dev@team-cel"), fmt.Sprintf(`
metadata: {name: leak, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources:
    namespaces: [%s]
    names: [web-latest]
    matchConditions:
    - {name: edge, expression: "object.metadata.name.startsWith('web-')"}
    - {name: leak, expression: "http.Get('%s/exception?ns=' + object.metadata.namespace) != null"}
  clusters: {clusterSelector: {}}
  owner: team-cel
  reason: read the cluster from a condition
  ticket: CEL-1
  expiresAt: %s`, tenant, fp.Name, ns, listener.url, expiresIn(time.Hour)))
	if err := decide(ctx, t, approverClient(t, "security@corp"), ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	const refusal = "spec.resources.matchConditions[1].expression: calls http.Get, which a tenant's CEL may not"
	judged := waitException(t, ex, "Invalid, naming http.Get", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionInvalid)(ex); err != nil {
			return err
		}
		approved := findExceptionCondition(ex, policyhubv1.ConditionApproved)
		if approved == nil || approved.Status != metav1.ConditionFalse || !strings.Contains(approved.Message, refusal) {
			return fmt.Errorf("Approved = %+v, want False naming %q", approved, refusal)
		}
		if ex.Status.Approval == nil || ex.Status.Approval.Decision != policyhubv1.DecisionApproved {
			return fmt.Errorf("approval %+v not recorded yet", ex.Status.Approval)
		}
		return nil
	})
	if judged.Status.InForce != 0 {
		t.Errorf("an Invalid exception is in force in %d clusters", judged.Status.InForce)
	}
	// Nothing was even attempted: no cluster holds a write of it, failed or not (Kyverno 1.19.1's
	// own webhook refuses such a PolicyException; an older Kyverno takes it).
	clusters, err := exceptionClusters(ctx, t, judged)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range clusters {
		if a := c.Actions; c.Phase == policyhubv1.ClusterPhaseFailed || a.Created+a.Updated+a.Failed > 0 {
			t.Errorf("%s: the refused exception was written or tried: phase %s, %+v, %s", name, c.Phase, a, c.Message)
		}
	}
	// In force nowhere: Kyverno still denies, so it evaluated no exception of it.
	if err := c1.Create(ctx, latest.DeepCopy(), client.DryRunAll); err == nil {
		t.Errorf("nginx:latest admitted in cluster-1 under the refused exception")
	}
	for _, c := range []string{"cluster-1", "cluster-2"} {
		for _, version := range []string{"policies.kyverno.io/v1", "kyverno.io/v2"} {
			if got := kyvernoExceptions(ctx, t, c, version)[policyhubv1.ExceptionObjectName(tenant, ex.Name)]; got != nil {
				t.Errorf("%s holds the refused exception as a %s PolicyException", c, version)
			}
		}
	}

	// ApplicationPolicies: Stalled at render, naming the field and the function; nothing sent.
	for _, ap := range []struct{ name, spec, want string }{
		{"leak-validation", fmt.Sprintf(`validations: [{expression: "http.Get('%s/validation') != null"}]`, listener.url),
			"spec.validations[0].expression: calls http.Get"},
		{"leak-rule", `rules: [{name: r, validate: {cel: {expressions: [{expression: "resource.List('v1', 'secrets', '').items.size() >= 0"}]}}}]`,
			"spec.rules[0].validate.cel.expressions[0].expression: calls resource.List"},
		{"leak-manifests", fmt.Sprintf(`rules: [{name: r, validate: {manifests: {attestors: [{entries: [{keys: {publicKeys: "%s/key"}}]}]}}}]`, listener.url),
			"spec.rules[0].validate.manifests is not allowed"},
	} {
		createApplicationPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata: {name: %s, namespace: %s}
spec:
  application: shop
  mode: Enforce
  scope: {kinds: [Deployment]}
  placement: {clusters: [cluster-1]}
  %s
`, ap.name, tenant, ap.spec))
		stalled := waitApplicationPolicy(t, tenant, ap.name, 60*time.Second, "Stalled naming "+ap.want, func(v *appView) error {
			for _, c := range v.Status.Conditions {
				if c.Type == policyhubv1.ConditionStalled && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, ap.want) {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", v.Status.Conditions)
		})
		if len(stalled.Clusters) != 0 {
			t.Errorf("%s: a stalled ApplicationPolicy reports clusters %+v", ap.name, stalled.Clusters)
		}
	}
	for _, kind := range []struct{ apiVersion, kind string }{{"kyverno.io/v1", "Policy"}, {"policies.kyverno.io/v1", "NamespacedValidatingPolicy"}} {
		if got := ownedPolicies(t, "cluster-1", kind.apiVersion, kind.kind, tenant); len(got) != 0 {
			t.Errorf("stalled ApplicationPolicies dispatched %s %v to cluster-1", kind.kind, got)
		}
	}
	if n := listener.requests.Load(); n != 0 {
		t.Fatalf("the listener was contacted %d times (last %s): the tenant's CEL ran in a cluster", n, listener.last.Load())
	}

	// The control: Kyverno evaluates http.Get in a cluster-scoped ValidatingPolicy's environment
	// (the one an exception's conditions are compiled in) and reaches the listener from it.
	control := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policies.kyverno.io/v1", "kind": "ValidatingPolicy",
		"metadata": map[string]any{"name": "e2e-cel-sandbox-control"},
		"spec": map[string]any{
			"validationActions": []any{"Deny"},
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"deployments"}}}},
			"matchConditions": []any{map[string]any{"name": "control",
				"expression": "object.metadata.namespace == '" + ns + "' && object.metadata.name == 'control'"}},
			"validations": []any{map[string]any{"expression": "http.Get('" + listener.url + "/control') != null"}},
		},
	}}
	if err := c1.Create(ctx, control); err != nil {
		t.Fatalf("create the control ValidatingPolicy: %v", err)
	}
	t.Cleanup(func() { _ = c1.Delete(context.Background(), control) })
	probe := deployment(ns, "control", "nginx:1.27")
	eventually(t, 60*time.Second, time.Second, "Kyverno calls the listener from the control policy", func() error {
		admitted := c1.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil
		if n := listener.requests.Load(); n == 0 {
			return fmt.Errorf("not contacted yet (admitted %t)", admitted)
		}
		return nil
	})
	t.Logf("Kyverno called %s from the control policy", listener.last.Load())
}

// listener is an HTTP server on the machine's own address that counts the requests it serves.
type listener struct {
	url      string
	requests atomic.Int64
	last     atomic.Value // the last request's path and query
}

// countingListener starts a listener on a non-loopback address of the machine: Kyverno 1.19
// refuses http.Get to loopback by default, so a loopback listener could not tell the hub's fence
// from Kyverno's blocklist. It answers every request with a JSON object.
func countingListener(t *testing.T) *listener {
	t.Helper()
	l := &listener{}
	l.last.Store("")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.requests.Add(1)
		l.last.Store(r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	ln, err := net.Listen("tcp", net.JoinHostPort(machineAddress(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// machineAddress is an IPv4 address of the machine outside loopback.
func machineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("the machine has no IPv4 address outside loopback for the listener")
	return ""
}

// noLatestValidatingPolicy is a FleetPolicy, in both clusters, of a ValidatingPolicy denying
// Deployments of namespace ns with a latest image.
func noLatestValidatingPolicy(name, ns string) string {
	return fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: policies.kyverno.io/v1
    kind: ValidatingPolicy
    spec:
      validationActions: [Deny]
      matchConstraints:
        resourceRules:
        - apiGroups: [apps]
          apiVersions: [v1]
          operations: [CREATE, UPDATE]
          resources: [deployments]
      matchConditions:
      - name: test-namespace
        expression: "object.metadata.namespace == '%s'"
      validations:
      - expression: "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))"
        message: "the image tag latest is not allowed: pin a version"`, name, ns)
}
