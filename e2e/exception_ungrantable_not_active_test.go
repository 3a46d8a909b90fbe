package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An approved exception that can never take effect as it stands — a tenant's `*` (refused,
// InvalidException) or `default` (not granted to the tenant, NotGranted) — is not listed Active
// with IN-FORCE 0: its state is Invalid, kubectl policyhub exception list says why under the
// table, and its approval stands. The POLICY column names every target one way (fp/NAME), the
// exception in force (whose Kyverno policy the hub resolved) like the others.
func TestExceptionUngrantableIsNotActive(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, granted = "team-ungrantable", "ungrantable-granted-e2e"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, granted) // both clusters; namespaces team-ungrantable and ungrantable-granted-e2e
	fp := enforcedLatestTag(t, "e2e-exception-ungrantable", granted)
	requester := tenantClient(t, tenant, "dev@team-ungrantable")
	approver := approverClient(t, "security@corp")
	request := func(name, namespaces string) *policyhubv1.FleetPolicyException {
		ex := requestException(t, requester, fmt.Sprintf(`
metadata: {name: %s, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: %s, names: [web-latest]}
  clusters: {clusterSelector: {}}
  owner: team-ungrantable
  reason: ungrantable
  ticket: U-1
  expiresAt: %s`, name, tenant, fp.Name, namespaces, expiresIn(time.Hour)))
		if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
			t.Fatalf("approve %s: %v", name, err)
		}
		return ex
	}
	notActive := func(reason, says string) func(*policyhubv1.FleetPolicyException) error {
		return func(ex *policyhubv1.FleetPolicyException) error {
			if err := exceptionState(policyhubv1.ExceptionInvalid)(ex); err != nil {
				return err
			}
			ready := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionReady)
			if ready == nil || ready.Status != "False" || ready.Reason != reason || !strings.Contains(ready.Message, says) || ex.Status.InForce != 0 {
				return fmt.Errorf("Ready %+v, inForce %d: want False, %s, saying %q, in force nowhere", ready, ex.Status.InForce, reason, says)
			}
			if !meta.IsStatusConditionTrue(ex.Status.Conditions, policyhubv1.ConditionApproved) {
				return fmt.Errorf("the approval no longer counts: %+v", ex.Status.Conditions)
			}
			return nil
		}
	}

	star := request("star", `["*"]`)
	deflt := request("default", "[default]")
	own := request("own", fmt.Sprintf("[%s]", granted))
	waitException(t, star, "Invalid: a wildcard", notActive("InvalidException", `"*" has a wildcard`))
	waitException(t, deflt, "Invalid: not granted", notActive("NotGranted", "cluster-1/default"))
	waitException(t, own, "in force in both clusters", func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.State != policyhubv1.ExceptionActive || ex.Status.InForce != 2 || ex.Status.Policy == "" {
			return fmt.Errorf("state %s, inForce %d, policy %q: want Active in 2 clusters, its policy resolved", ex.Status.State, ex.Status.InForce, ex.Status.Policy)
		}
		return nil
	})

	code, out, errOut := cliReadRun(t, "exception", "list", "-n", tenant)
	if code != 0 {
		t.Fatalf("exception list: exit %d\n%s%s", code, out, errOut)
	}
	rows := map[string][]string{}
	var why []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "exception ") {
			why = append(why, line)
			continue
		}
		if f := strings.Fields(line); len(f) > 3 && f[0] != "NAME" {
			rows[f[0]] = f
		}
	}
	for name, state := range map[string]string{star.Name: "Invalid", deflt.Name: "Invalid", own.Name: "Active"} {
		row := rows[name]
		if len(row) < 4 || row[2] != "fp/"+fp.Name || row[3] != state {
			t.Errorf("exception list: row %q is %v, want POLICY fp/%s and STATE %s\n%s", name, row, fp.Name, state, out)
		}
	}
	for name, says := range map[string]string{star.Name: `InvalidException: spec.resources.namespaces: "*" has a wildcard`, deflt.Name: "NotGranted: not granted to namespace " + tenant} {
		if !slices.ContainsFunc(why, func(l string) bool {
			return strings.HasPrefix(l, "exception "+tenant+"/"+name+" is Invalid, in force in 0 clusters: ") && strings.Contains(l, says)
		}) {
			t.Errorf("exception list does not say why %s is not in force (%q):\n%s", name, says, out)
		}
	}
	if len(why) != 2 {
		t.Errorf("exception list explains %d exceptions, want the 2 not in force:\n%s", len(why), out)
	}
	for _, c := range []string{"cluster-1", "cluster-2"} {
		held := kyvernoExceptions(ctx, t, c, "kyverno.io/v2")
		for _, ex := range []*policyhubv1.FleetPolicyException{star, deflt} {
			if held[policyhubv1.ExceptionObjectName(tenant, ex.Name)] != nil {
				t.Errorf("%s holds exception %s, which the hub says is in force nowhere", c, ex.Name)
			}
		}
	}
}
