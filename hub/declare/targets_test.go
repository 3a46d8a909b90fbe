package declare

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
)

const clusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  rules:
  - name: need-team
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate: {failureAction: Enforce, message: team, pattern: {metadata: {labels: {team: "?*"}}}}
`

func fleetPolicy(t *testing.T, spec string) *policyhubv1.FleetPolicy {
	t.Helper()
	fp := &policyhubv1.FleetPolicy{}
	fp.Name = "team"
	if err := yaml.Unmarshal([]byte(spec), &fp.Spec); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(clusterPolicy), &fp.Spec.Template); err != nil {
		t.Fatal(err)
	}
	return fp
}

// A FleetPolicy runs down the flow: placement picks the clusters (a name the inventory lacks is
// Unknown), its rollout chooses what each gets (clusters of a wave not reached are held), and
// rendering renders only that.
func TestFleetPolicyTargetsPlaceRolloutRender(t *testing.T) {
	inv := placement.Inventory{Clusters: []placement.Cluster{
		{Name: "canary", Labels: map[string]string{"ring": "0"}}, {Name: "prod-1"}, {Name: "prod-2"}}}
	fp := fleetPolicy(t, `
placement: {clusters: [canary, prod-1, prod-2, gone]}
rollout: {waves: [{name: first, clusters: [canary]}, {name: rest}]}`)
	revision, err := render.TemplateRevision(fp.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	// The rollout has started: its first wave audits.
	fp.Status.Rollout = &policyhubv1.RolloutStatus{Revision: revision, Waves: []policyhubv1.WaveStatus{{Name: "first", Phase: "Auditing"}}}
	got, plan, err := FleetPolicyTargets("hub", fp, inv)
	if err != nil {
		t.Fatal(err)
	}
	if plan == nil || len(plan.Waves) != 2 {
		t.Fatalf("rollout plan %+v, want two waves", plan)
	}
	if strings.Join(got.Clusters(), ",") != "canary" || strings.Join(got.Held, ",") != "prod-1,prod-2" || strings.Join(got.Unknown, ",") != "gone" {
		t.Errorf("clusters %v, held %v, unknown %v; want canary synced (its wave audits), the rest held, gone unknown",
			got.Clusters(), got.Held, got.Unknown)
	}
	rules := got.Objects["canary"][0].Object["spec"].(map[string]any)["rules"].([]any)
	if action := rules[0].(map[string]any)["validate"].(map[string]any)["failureAction"]; action != "Audit" {
		t.Errorf("canary's policy has failureAction %v, want Audit (its wave audits)", action)
	}

	plain := fleetPolicy(t, `placement: {clusters: [canary, prod-1]}`)
	got, plan, err = FleetPolicyTargets("hub", plain, inv)
	if err != nil || plan != nil || strings.Join(got.Clusters(), ",") != "canary,prod-1" || len(got.Held) != 0 {
		t.Errorf("without a rollout: clusters %v, held %v, plan %v, %v; want both clusters, nothing held, no plan", got.Clusters(), got.Held, plan, err)
	}

	for _, tt := range []struct{ name, spec, reason string }{
		{"a wave selecting every cluster by accident", `
placement: {clusters: [canary]}
rollout: {waves: [{name: first, clusterSelector: {}}, {name: rest}]}`, "InvalidRollout"},
		{"a placement selecting every cluster by accident", `placement: {clusterSelector: {}}`, "InvalidPlacement"},
	} {
		_, _, err := FleetPolicyTargets("hub", fleetPolicy(t, tt.spec), inv)
		if invalid, ok := render.AsInvalid(err); !ok || invalid.Reason != tt.reason {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.reason)
		}
	}
}
