package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// `kubectl policyhub exception` end to end against the real hub, each step as the user it is
// for (--as): a tenant requests, is refused approving its own request, an approver approves, the
// list shows the exception Active in force in the cluster it names, and the approver revokes.
func TestExceptionCLI(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, ns = "team-cli", "exception-cli-e2e"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, testFleet.Cluster(c).Config), ns)
	}
	hub := directClient(t, testFleet.Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, ns)
	fp := enforcedLatestTag(t, "e2e-exception-cli", ns)
	tenantClient(t, tenant, "dev@team-cli") // binds the tenant role
	approverClient(t, "security@corp")
	run := func(user string, args ...string) (int, string, string) {
		t.Helper()
		return cliReadRun(t, append([]string{"--as", user}, args...)...)
	}

	code, out, errOut := run("dev@team-cli", "exception", "request", "vendor", "-n", tenant, "--policy", fp.Name,
		"--namespaces", ns, "--kinds", "Deployment", "--names", "web-latest", "--clusters", "cluster-1",
		"--owner", "team-cli", "--reason", "vendor image", "--ticket", "CLI-1", "--expires-in", "2h")
	if code != 0 || !strings.Contains(out, "requested by dev@team-cli") {
		t.Fatalf("request: exit %d\n%s%s", code, out, errOut)
	}
	ex := &policyhubv1.FleetPolicyException{}
	ex.Namespace, ex.Name = tenant, "vendor"
	t.Cleanup(func() { _ = hub.Delete(ctx, ex) })

	if code, out, errOut := run("dev@team-cli", "exception", "approve", "vendor", "-n", tenant); code != 2 || !strings.Contains(errOut, "you (dev@team-cli) requested it: another approver must decide") {
		t.Errorf("the requester's approve: exit %d, want 2 saying they requested it\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("security@corp", "exception", "approve", "vendor", "-n", tenant, "--comment", "until the vendor's 2.0"); code != 0 ||
		!strings.Contains(out, "approved") || !strings.Contains(out, "security@corp") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	waitException(t, ex, "Active in cluster-1", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 1 {
			return fmt.Errorf("inForce %d", ex.Status.InForce)
		}
		return nil
	})
	code, out, errOut = run("dev@team-cli", "exception", "list", "-n", tenant)
	if code != 0 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"vendor", "ClusterPolicy/" + fp.Name, "Active", "team-cli", "CLI-1", "dev@team-cli", "security@corp"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = cliReadRun(t, "status", fp.Name)
	if want := "exception " + tenant + "/vendor from FleetPolicy/" + fp.Name + ": in force in 1 clusters"; !strings.Contains(out, want) {
		t.Errorf("status (exit %d) lacks %q:\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = cliReadRun(t, "info", "web", "-n", ns)
	if want := tenant + "/vendor"; !strings.Contains(out, "Exceptions in force in the namespace:") || !strings.Contains(out, want) {
		t.Errorf("info (exit %d) does not name exception %s:\n%s%s", code, want, out, errOut)
	}
	if code, out, errOut := run("security@corp", "exception", "revoke", "vendor", "-n", tenant); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
	}
	waitException(t, ex, "Revoked", exceptionState(policyhubv1.ExceptionRevoked))
}
