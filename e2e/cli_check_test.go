package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// checkCLIReport is the shape of `check -o json`, as a script reads it.
type checkCLIReport struct {
	Cluster   string `json:"cluster"`
	Resources []struct {
		Kind      string   `json:"kind"`
		Namespace string   `json:"namespace"`
		Name      string   `json:"name"`
		Result    string   `json:"result"`
		Message   string   `json:"message"`
		Warnings  []string `json:"warnings"`
	} `json:"resources"`
	Summary struct {
		Allowed, Denied, Errors int
	} `json:"summary"`
}

// checkCLIManifests are two Deployments of application shop: one with a team label (namespace
// left to -n), one without (namespace given).
func checkCLIManifests(t *testing.T, ns string) string {
	t.Helper()
	var docs []string
	for _, d := range []*appsv1.Deployment{shopDeployment("", "compliant", "payments"), shopDeployment(ns, "noncompliant", "")} {
		d.APIVersion, d.Kind = "apps/v1", "Deployment"
		out, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(out))
	}
	return strings.Join(docs, "---\n")
}

// check -f on a compliant and a non-compliant Deployment, with an Enforce policy in cluster-1
// requiring a team label: exit 1, the non-compliant one denied with Kyverno's message, the
// compliant one allowed (with the warning of an Audit policy that emits warnings), nothing created. An unknown cluster and a missing -f exit 2 with one line.
func TestCLICheck(t *testing.T) {
	ctx := testContext(t)
	const ns, policyName = "cli-check", "e2e-cli-check-team"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	policy := object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  rules:
  - name: need-team
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: Enforce
      message: "Deployments need a team label"
      pattern:
        metadata:
          labels:
            team: "?*"
`, policyName, ns))
	apply(ctx, t, gatewayClient(t, "cluster-1"), policy)
	t.Cleanup(func() { _ = gatewayClient(t, "cluster-1").Delete(ctx, policy) })
	// An Audit policy that emits warnings: Kyverno admits, and says why in a warning.
	warn := object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s-owner
spec:
  background: false
  emitWarning: true
  rules:
  - name: need-owner
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: Audit
      message: "Deployments should name an owner"
      pattern:
        metadata:
          labels:
            owner: "?*"
`, policyName, ns))
	apply(ctx, t, gatewayClient(t, "cluster-1"), warn)
	t.Cleanup(func() { _ = gatewayClient(t, "cluster-1").Delete(ctx, warn) })

	manifests := checkCLIManifests(t, ns)
	file := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}

	// Kyverno takes a few seconds to program its webhook for a new policy; check persists
	// nothing, so it is safe to poll with.
	var code int
	var out, errOut string
	eventually(t, 90*time.Second, time.Second, "check reports Kyverno's denial and warning", func() error {
		code, out, errOut = syncCheckRun(t, "", "check", "-f", file, "--cluster", "cluster-1", "-n", ns)
		if code != app.ExitFindings || !strings.Contains(out, "warning: ") {
			return fmt.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		return nil
	})
	for _, want := range []string{
		"allowed  Deployment  cli-check  compliant",
		"denied   Deployment  cli-check  noncompliant",
		`admission webhook "validate.kyverno.svc-fail" denied the request`,
		"resource Deployment/cli-check/noncompliant was blocked due to the following policies",
		policyName,
		"Deployments need a team label",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	syncCheckGolden(t, "check-deployments.table.golden", out)

	// The same from stdin, as JSON.
	code, out, errOut = syncCheckRun(t, manifests, "check", "-f", "-", "--cluster", "cluster-1", "-n", ns, "-o", "json")
	if code != app.ExitFindings {
		t.Fatalf("-f - -o json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var report checkCLIReport
	if err := unmarshalJSON([]byte(out), &report); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, out)
	}
	if len(report.Resources) != 2 || report.Summary.Allowed != 1 || report.Summary.Denied != 1 || report.Cluster != "cluster-1" {
		t.Fatalf("report %+v", report)
	}
	if r := report.Resources[0]; r.Name != "compliant" || r.Namespace != ns || r.Result != "allowed" || r.Message != "" ||
		len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "Deployments should name an owner") {
		t.Errorf("compliant: %+v", r)
	}
	if r := report.Resources[1]; r.Name != "noncompliant" || r.Result != "denied" ||
		!strings.HasPrefix(r.Message, `admission webhook "validate.kyverno.svc-fail" denied the request`) || !strings.Contains(r.Message, "Deployments need a team label") {
		t.Errorf("noncompliant: %+v", r)
	}
	syncCheckGolden(t, "check-deployments.json.golden", out)

	for _, name := range []string{"compliant", "noncompliant"} {
		if err := cluster.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("check created Deployment %s/%s (Get: %v)", ns, name, err)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-f", file, "--cluster", "no-such-cluster"}, "error: cluster no-such-cluster is not in the inventory (clusters: "},
		{[]string{"check", "--cluster", "cluster-1"}, "error: -f is required"},
	} {
		code, out, errOut := syncCheckRun(t, "", tc.args...)
		if code != app.ExitError || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
