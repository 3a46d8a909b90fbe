package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// `kubectl policyhub exception` end to end against the real hub, each step as the user it is
// for (--as): a tenant's dry run creates nothing; it requests, cannot request the same name again,
// and is refused approving its own request; a peer without the approver role is refused by RBAC
// with the role named; a missing name is said plainly; an approval of a generation that is no
// longer the current one (the requester changed the spec after the approver reviewed it) is
// refused and nothing is stored or put in force; an approver denies, then approves the generation
// reviewed (the decision stored whole: approver, generation, time, comment); the list, status and
// info show the exception in force; the approver revokes.
func TestExceptionCLI(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, ns = "team-cli", "exception-cli-e2e"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, ns)
	fp := enforcedLatestTag(t, "e2e-exception-cli", ns)
	tenantClient(t, tenant, "dev@team-cli") // binds the tenant role
	approverClient(t, "security@corp")
	run := func(user string, args ...string) (int, string, string) {
		t.Helper()
		return cliReadRun(t, append([]string{"--as", user}, args...)...)
	}

	request := []string{"exception", "request", "vendor", "-n", tenant, "--policy", fp.Name,
		"--namespaces", ns, "--kinds", "Deployment", "--names", "web-latest", "--clusters", "cluster-1",
		"--owner", "team-cli", "--reason", "vendor image", "--ticket", "CLI-1", "--expires-in", "2h"}
	ex := &policyhubv1.FleetPolicyException{}
	ex.Namespace, ex.Name = tenant, "vendor"

	// A dry run has the hub admit the request and creates nothing.
	code, out, errOut := run("dev@team-cli", append(request, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "name: vendor") || !strings.Contains(errOut, "dry run: the hub accepted the request and created nothing") {
		t.Fatalf("request --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), &policyhubv1.FleetPolicyException{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the dry run: %v, want NotFound", err)
	}

	code, out, errOut = run("dev@team-cli", request...)
	if code != 0 || !strings.Contains(out, "requested by dev@team-cli") {
		t.Fatalf("request: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, ex) })
	if code, out, errOut := run("dev@team-cli", request...); code != 2 || !strings.Contains(errOut, "fleetpolicyexception "+tenant+"/vendor already exists") {
		t.Errorf("the same request again: exit %d, want 2 saying it exists\n%s%s", code, out, errOut)
	}

	// Another member of the team may read it, not decide on it: RBAC refuses, and the CLI says
	// which role deciding needs. A name that does not exist is said plainly.
	tenantClient(t, tenant, "peer@team-cli")
	if code, out, errOut := run("peer@team-cli", "exception", "approve", "vendor", "-n", tenant, "--generation", "1"); code != 2 ||
		!strings.Contains(errOut, "approving needs verb approve on fleetpolicyexceptions (the policyhub-exception-approver ClusterRole)") {
		t.Errorf("a peer's approve: exit %d, want 2 naming the approver role\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("security@corp", "exception", "approve", "nope", "-n", tenant, "--generation", "1"); code != 2 || !strings.Contains(errOut, "fleetpolicyexception "+tenant+"/nope not found") {
		t.Errorf("approve a missing exception: exit %d\n%s%s", code, out, errOut)
	}
	if live := waitException(t, ex, "undecided", exceptionState(policyhubv1.ExceptionPending)); live.Status.Approval != nil {
		t.Fatalf("a refused decision was stored: %+v", live.Status.Approval)
	}

	if code, out, errOut := run("dev@team-cli", "exception", "approve", "vendor", "-n", tenant, "--generation", "1"); code != 2 || !strings.Contains(errOut, "you (dev@team-cli) requested it: another approver must decide") {
		t.Errorf("the requester's approve: exit %d, want 2 saying they requested it\n%s%s", code, out, errOut)
	}
	// The approver reviews generation 1 (list shows it); the requester then widens the spec. The
	// approval of generation 1 is refused: what is there now is not what the approver read.
	if code, out, errOut := run("security@corp", "exception", "list", "-n", tenant); code != 0 || !strings.Contains(out, "GENERATION") ||
		!strings.Contains(strings.Join(strings.Fields(out), " "), "vendor 1 fp/"+fp.Name) {
		t.Errorf("list does not show generation 1 to review: exit %d\n%s%s", code, out, errOut)
	}
	widened := &policyhubv1.FleetPolicyException{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), widened); err != nil {
		t.Fatal(err)
	}
	widened.Spec.Resources.Names = []string{"*"}
	if err := tenantClient(t, tenant, "dev@team-cli").Update(ctx, widened); err != nil || widened.Generation != 2 {
		t.Fatalf("the requester widening the spec: %v (generation %d)", err, widened.Generation)
	}
	if code, out, errOut := run("security@corp", "exception", "approve", "vendor", "-n", tenant, "--generation", "1"); code != 2 ||
		!strings.Contains(errOut, "fleetpolicyexception "+tenant+"/vendor is at generation 2, not 1: its spec changed since the generation you reviewed") {
		t.Errorf("approve of a stale generation: exit %d, want 2 naming the generations\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("security@corp", "exception", "approve", "vendor", "-n", tenant); code != 2 || !strings.Contains(errOut, "approve needs --generation N") {
		t.Errorf("approve without the generation reviewed: exit %d, want 2\n%s%s", code, out, errOut)
	}
	if live := waitException(t, ex, "Pending at generation 2", exceptionState(policyhubv1.ExceptionPending)); live.Status.Approval != nil || live.Status.InForce != 0 {
		t.Fatalf("a stale approval was stored or put in force: %+v, in force %d", live.Status.Approval, live.Status.InForce)
	}
	for _, c := range []string{"cluster-1", "cluster-2"} {
		if got := kyvernoExceptions(ctx, t, c, "kyverno.io/v2"); len(got) != 0 {
			t.Errorf("%s holds PolicyExceptions %v after a refused approval", c, keysOf(got))
		}
	}
	// A denial, then an approval of the generation reviewed that replaces it whole: decision,
	// approver, generation, time, comment.
	if code, out, errOut := run("security@corp", "exception", "deny", "vendor", "-n", tenant, "--comment", "no ticket yet"); code != 0 || !strings.Contains(out, "denied") {
		t.Fatalf("deny: exit %d\n%s%s", code, out, errOut)
	}
	waitException(t, ex, "Denied", exceptionState(policyhubv1.ExceptionDenied))
	if code, out, errOut := run("security@corp", "exception", "approve", "vendor", "-n", tenant, "--generation", "2", "--comment", "until the vendor's 2.0"); code != 0 ||
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
	stored := &policyhubv1.FleetPolicyException{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), stored); err != nil {
		t.Fatal(err)
	}
	if a := stored.Status.Approval; a == nil || a.Decision != policyhubv1.DecisionApproved || a.By != "security@corp" ||
		a.Generation != stored.Generation || a.At == nil || a.Comment != "until the vendor's 2.0" {
		t.Errorf("stored approval %+v (generation %d)", a, stored.Generation)
	}
	if code, out, errOut := run("security@corp", "exception", "list", "-n", ns); code != 0 || out != "" || !strings.Contains(errOut, "No exceptions found in namespace "+ns) {
		t.Errorf("list in a namespace without exceptions: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("dev@team-cli", "exception", "list", "-n", ns); code != 2 || !strings.Contains(errOut, "permission denied: list FleetPolicyExceptions") {
		t.Errorf("the tenant listing a namespace it is not bound in: exit %d, want 2 and permission denied\n%s%s", code, out, errOut)
	}
	code, out, errOut = run("dev@team-cli", "exception", "list", "-n", tenant)
	if code != 0 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	// POLICY names the target as --policy does, before and after the hub resolved it.
	for _, want := range []string{"vendor", "fp/" + fp.Name, "Active", "team-cli", "CLI-1", "dev@team-cli", "security@corp"} {
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
