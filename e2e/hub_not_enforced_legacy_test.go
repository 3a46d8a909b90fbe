package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
)

// kyverno120Message is Kyverno 1.20's refusal of a legacy write (kyverno#17708: "execution was
// removed in v1.20; the API remains available"), as the admission policy standing in for it says.
const kyverno120Message = "ClusterPolicy (kyverno.io) execution was removed in v1.20; the API remains available: migrate to policies.kyverno.io/v1 ValidatingPolicy"

// A cluster made to behave as Kyverno 1.20 does for the legacy kinds (no 1.20 release exists to run):
// an admission policy in cluster-2 denies creates and updates of kyverno.io policies with Kyverno's
// 1.20 message, and its agent's summary says which Kyverno runs there. A legacy FleetPolicy
// (ClusterPolicy, Enforce) synced in both clusters then
//   - turns NotEnforced in cluster-2 at the first write Kyverno refuses, with the refusal and
//     what to do, in force false, counted unprotected in status, metrics, the CLI and the web
//     view, while it stays Synced and in force in cluster-1;
//   - costs cluster-2 no write of clusterpolicies over 25 resyncs, one a second (its apiserver's own
//     request counter), the refusal remembered;
//   - is NotEnforced by the version alone (admission policy gone, summary saying v1.20.0), with
//     nothing written, and Synced again once the version says 1.19 (a change of the engine facts
//     is a retry);
//   - is still pruned from cluster-2 when deleted (Kyverno allows deletes).
func TestHubNotEnforcedLegacy(t *testing.T) {
	h := startHub(t, time.Second) // resyncs every second: each would rewrite, were a refusal retried
	ctx := context.Background()
	const ns, name = "not-enforced-e2e", "e2e-not-enforced-legacy"
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	cluster2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, cluster1, ns)
	createNamespace(ctx, t, cluster2, ns)
	versions := &kyvernoVersions{t: t, started: map[string]bool{}}

	template := func(message string) string {
		policy := latestTagPolicy(t, "unused", ns, "Enforce")
		rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "rules")
		_ = unstructured.SetNestedField(rules[0].(map[string]any), message, "validate", "message")
		_ = unstructured.SetNestedSlice(policy.Object, rules, "spec", "rules")
		return string(marshalJSON(policy.Object["spec"]))
	}
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, name, template("the image tag latest is not allowed: pin a version")))
	waitFleetPolicy(t, name, "in force in both clusters", allInForce)

	// Denial-driven: the admission policy alone, no version signal. A new template is written to
	// cluster-1 and refused by cluster-2.
	kyverno120Admission(ctx, t, cluster2)
	writesBefore := clusterPolicyWrites(t, "cluster-2")
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Template.Spec.Raw = []byte(template("pin the image version (the latest tag is refused)"))
	})
	fp := waitFleetPolicy(t, name, "NotEnforced in cluster-2 by Kyverno's refusal, Synced in cluster-1", func(fp *fleetView) error {
		c1, c2 := clusterStatus(fp, "cluster-1"), clusterStatus(fp, "cluster-2")
		if c1 == nil || c1.Phase != policyhubv1.ClusterPhaseSynced || c1.InForce == nil || !*c1.InForce || c1.Actions.Updated+c1.Actions.Unchanged == 0 {
			return fmt.Errorf("cluster-1: %+v", c1)
		}
		if c2 == nil || c2.Phase != policyhubv1.ClusterPhaseNotEnforced {
			return fmt.Errorf("cluster-2: %+v", c2)
		}
		return nil
	})
	c2 := clusterStatus(fp, "cluster-2")
	for _, want := range []string{"not enforced in cluster cluster-2", "refused the hub's write", "execution was removed in v1.20", "kyverno.io/v1 ClusterPolicy", "ClusterPolicy → policies.kyverno.io/v1 ValidatingPolicy"} {
		if !strings.Contains(c2.Message, want) {
			t.Errorf("cluster-2's message %q lacks %q", c2.Message, want)
		}
	}
	if c2.InForce == nil || *c2.InForce {
		t.Errorf("cluster-2 in force %v, want false", c2.InForce)
	}
	if s := fp.Status.Summary; s.NotEnforced != 1 || s.Failed != 1 || s.Synced != 1 {
		t.Errorf("status summary %+v: want 1 not enforced (failed), 1 synced", s)
	}
	if refused := clusterPolicyWrites(t, "cluster-2") - writesBefore; refused < 1 {
		t.Fatalf("cluster-2's apiserver counted %d writes of clusterpolicies for the refused update: the count cannot see the hub's writes", refused)
	}
	assertNotEnforcedShown(t, h, name)

	// No write per pass: 25 resyncs, not one write of clusterpolicies in cluster-2.
	writesBefore = clusterPolicyWrites(t, "cluster-2")
	holds(t, 25*time.Second, "cluster-2 stays NotEnforced", func() error {
		fp, err := fleetPolicyWithClusters(ctx, hub, name)
		if err != nil {
			return err
		}
		if c := clusterStatus(fp, "cluster-2"); c == nil || c.Phase != policyhubv1.ClusterPhaseNotEnforced {
			return fmt.Errorf("cluster-2: %+v", c)
		}
		return nil
	})
	if writes := clusterPolicyWrites(t, "cluster-2") - writesBefore; writes != 0 {
		t.Errorf("cluster-2's apiserver counted %d writes of clusterpolicies over 25 resyncs, want 0", writes)
	}

	// Version-driven: without the admission policy, the agent's summary says v1.20.0: still
	// NotEnforced, for that reason, and nothing written (cluster-2 keeps the old template).
	removeKyverno120Admission(ctx, t, cluster2)
	versions.set("cluster-2", "v1.20.0")
	waitFleetPolicy(t, name, "NotEnforced in cluster-2 by its Kyverno version", func(fp *fleetView) error {
		if c := clusterStatus(fp, "cluster-2"); c == nil || c.Phase != policyhubv1.ClusterPhaseNotEnforced || !strings.Contains(c.Message, "its Kyverno is v1.20.0") {
			return fmt.Errorf("cluster-2: %+v", c)
		}
		return nil
	})
	holds(t, 10*time.Second, "cluster-2 keeps the template it had (nothing written)", func() error {
		return liveMessage(ctx, cluster2, name, "the image tag latest is not allowed: pin a version")
	})

	// The engine facts change back to 1.19: the hub writes again, and the policy is in force.
	versions.set("cluster-2", "v1.19.1")
	waitFleetPolicy(t, name, "in force in both clusters once cluster-2 runs 1.19", allInForce)
	if err := liveMessage(ctx, cluster2, name, "pin the image version (the latest tag is refused)"); err != nil {
		t.Error(err)
	}

	// Deleting the declaration prunes it from a 1.20 cluster: Kyverno allows deletes.
	versions.set("cluster-2", "v1.20.0")
	kyverno120Admission(ctx, t, cluster2)
	waitFleetPolicy(t, name, "NotEnforced in cluster-2 again", func(fp *fleetView) error {
		if c := clusterStatus(fp, "cluster-2"); c == nil || c.Phase != policyhubv1.ClusterPhaseNotEnforced {
			return fmt.Errorf("cluster-2: %+v", c)
		}
		return nil
	})
	if err := hub.Delete(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, 200*time.Millisecond, "the ClusterPolicy pruned from both clusters and the FleetPolicy gone", func() error {
		for cluster, c := range map[string]client.Client{"cluster-1": cluster1, "cluster-2": cluster2} {
			live := &unstructured.Unstructured{}
			live.SetAPIVersion("kyverno.io/v1")
			live.SetKind("ClusterPolicy")
			if err := c.Get(ctx, client.ObjectKey{Name: name}, live); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still holds it (%v)", cluster, err)
			}
		}
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, &policyhubv1.FleetPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("FleetPolicy still there (%v)", err)
		}
		return nil
	})
}

// kyverno120Admission makes the cluster refuse creates and updates of kyverno.io policies as
// Kyverno 1.20 does (a ValidatingAdmissionPolicy with its message), until the test ends, and waits
// until it is in effect.
func kyverno120Admission(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	apply(ctx, t, c, object(t, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: e2e-kyverno-1-20}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [kyverno.io]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE]
      resources: [clusterpolicies, policies]
  validations:
  - expression: "false"
    message: %q
`, kyverno120Message)))
	apply(ctx, t, c, object(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: e2e-kyverno-1-20}
spec:
  policyName: e2e-kyverno-1-20
  validationActions: [Deny]
`))
	t.Cleanup(func() { removeKyverno120Admission(context.Background(), t, c) })
	probe := latestTagPolicy(t, "e2e-kyverno-1-20-probe", "default", "Audit")
	eventually(t, 30*time.Second, 200*time.Millisecond, "the 1.20 admission policy in effect", func() error {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "execution was removed in v1.20") {
			return fmt.Errorf("a dry-run create of a ClusterPolicy: %v", err)
		}
		return nil
	})
}

// removeKyverno120Admission takes kyverno120Admission's policy away and waits until writes pass.
func removeKyverno120Admission(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	for _, kind := range []string{"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"} {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("admissionregistration.k8s.io/v1")
		obj.SetKind(kind)
		obj.SetName("e2e-kyverno-1-20")
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", kind, err)
		}
	}
	probe := latestTagPolicy(t, "e2e-kyverno-1-20-probe", "default", "Audit")
	eventually(t, 30*time.Second, 200*time.Millisecond, "the 1.20 admission policy gone", func() error {
		return c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
	})
}

// kyvernoVersions makes a cluster's Kyverno say a version the way a real cluster does (its
// admission controller Deployment's image tag: fleet's SayKyvernoVersion), runs the cluster's
// agent, and waits until the agent has reported the version to the hub. The real version is
// said again when the test ends.
type kyvernoVersions struct {
	t       *testing.T
	started map[string]bool
}

func (k *kyvernoVersions) set(cluster, version string) {
	t := k.t
	t.Helper()
	ctx := context.Background()
	restore, err := fleetOf(t).Cluster(cluster).SayKyvernoVersion(ctx, version)
	if err != nil {
		t.Fatalf("%s: say Kyverno %s: %v", cluster, version, err)
	}
	if !k.started[cluster] {
		k.started[cluster] = true
		t.Cleanup(func() {
			if err := restore(context.Background()); err != nil {
				t.Errorf("%s: say the real Kyverno version again: %v", cluster, err)
			}
		})
		startAgent(t, cluster)
	}
	eventually(t, 60*time.Second, 500*time.Millisecond, cluster+"'s agent reports Kyverno "+version, func() error {
		e, err := engineOf(t, cluster)
		if err != nil {
			return err
		}
		if e.Kyverno == nil || e.Kyverno.Version != version {
			return fmt.Errorf("engine facts %+v", e.Kyverno)
		}
		return nil
	})
}

// liveMessage checks the validate message of the ClusterPolicy name in the cluster.
func liveMessage(ctx context.Context, c client.Client, name, want string) error {
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("kyverno.io/v1")
	live.SetKind("ClusterPolicy")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		return err
	}
	rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
	if len(rules) == 0 {
		return fmt.Errorf("no rules in %s", name)
	}
	got, _, _ := unstructured.NestedString(rules[0].(map[string]any), "validate", "message")
	if got != want {
		return fmt.Errorf("the live ClusterPolicy's message is %q, want %q", got, want)
	}
	return nil
}

// clusterPolicyWrites is the cluster's apiserver's own count of write requests (create, update,
// patch, apply; dry-runs and refused ones included) of kyverno.io clusterpolicies, from its
// /metrics (apiserver_request_total): every client's, the hub's through the gateway among them.
func clusterPolicyWrites(t *testing.T, cluster string) int64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read %s's apiserver /metrics: %v", cluster, err)
	}
	var total int64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := line[:strings.LastIndexByte(line, '}')+1]
		if !strings.Contains(labels, `group="kyverno.io"`) || !strings.Contains(labels, `resource="clusterpolicies"`) || !strings.Contains(labels, `subresource=""`) {
			continue
		}
		write := false
		for _, verb := range []string{"CREATE", "UPDATE", "PATCH", "APPLY"} {
			write = write || strings.Contains(labels, `verb="`+verb+`"`)
		}
		if !write {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[len(labels):]), 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += int64(v)
	}
	return total
}

// assertNotEnforcedShown checks that cluster-2's NotEnforced state is where users look: the hub's
// metrics (its own phase, not in force), `kubectl policyhub status -o json` and the web view.
func assertNotEnforcedShown(t *testing.T, h *testHub, name string) {
	t.Helper()
	eventually(t, 10*time.Second, 200*time.Millisecond, "the hub's metrics count cluster-2 not enforced", func() error {
		if v, ok := h.scrape(t, "policyhub_cluster_declarations", map[string]string{"cluster": "cluster-2", "phase": "not_enforced"}); !ok || v != 1 {
			return fmt.Errorf("policyhub_cluster_declarations{cluster-2, not_enforced} = %v (%v), want 1", v, ok)
		}
		if v, ok := h.scrape(t, "policyhub_cluster_declarations_in_force", map[string]string{"cluster": "cluster-2"}); !ok || v != 0 {
			return fmt.Errorf("policyhub_cluster_declarations_in_force{cluster-2} = %v (%v), want 0", v, ok)
		}
		if v, ok := h.scrape(t, "policyhub_cluster_declarations_in_force", map[string]string{"cluster": "cluster-1"}); !ok || v != 1 {
			return fmt.Errorf("policyhub_cluster_declarations_in_force{cluster-1} = %v (%v), want 1", v, ok)
		}
		if v := h.counter(t, "policyhub_sync_errors_total", map[string]string{"cluster": "cluster-2", "reason": "not_enforced"}); v < 1 {
			return fmt.Errorf("policyhub_sync_errors_total{cluster-2, not_enforced} = %v", v)
		}
		return nil
	})

	_, out, errOut := cliReadRun(t, "status", name, "-o", "json")
	var report struct {
		Declarations []struct {
			Clusters []struct{ Name, Phase, Message string }
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || len(report.Declarations) != 1 {
		t.Fatalf("kubectl policyhub status -o json: %v %s %s", err, out, errOut)
	}
	var cli string
	for _, c := range report.Declarations[0].Clusters {
		if c.Name == "cluster-2" {
			cli = c.Phase + ": " + c.Message
		}
	}
	if !strings.HasPrefix(cli, "NotEnforced: not enforced in cluster cluster-2") {
		t.Errorf("kubectl policyhub status says of cluster-2 %q", cli)
	}

	base := startUI(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	get := func(url string) string {
		resp, err := browser.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", url, resp.Status, body)
		}
		return string(body)
	}
	get(base) // trades the one-time token for the session
	root := base[:strings.Index(base, "/?")]
	page := get(root + pages.DeclarationURL(policyhubv1.KindFleetPolicy, "", name))
	for _, want := range []string{`class="phase-notenforced">NotEnforced<`, "not enforced in cluster cluster-2", "1 not enforced: unprotected"} {
		if !strings.Contains(page, want) {
			t.Errorf("the web view's page of %s lacks %q", name, want)
		}
	}
}
