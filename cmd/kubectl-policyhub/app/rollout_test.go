package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestRolloutStatusRowsAndTable(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	fps := []policyhubv1.FleetPolicy{
		// Not rolled out: no rows.
		{ObjectMeta: metav1.ObjectMeta{Name: "aaa-plain"}},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "require-limits"},
			Spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Rollout: &policyhubv1.Rollout{Paused: true, Waves: []policyhubv1.RolloutWave{
				{Name: "canary"}, {Name: "staging"}, {Name: "prod"},
			}}}},
			Status: policyhubv1.FleetPolicyStatus{Rollout: &policyhubv1.RolloutStatus{
				Revision: "sha256:3f2a9c1b7d0e5f4a6b8c", CurrentWave: "staging",
				Waves: []policyhubv1.WaveStatus{
					// Status order differs from the spec's; the spec's wins.
					{Name: "staging", Phase: policyhubv1.WaveWaiting, Since: ago(5 * time.Minute), Clusters: 3, Fail: 2, Blocked: 1, LegacyObjects: ptrTo(int64(3)),
						Reason: "gate: fail 2 > maxFail 0,\n blocked 1 > maxBlocked 0"},
					{Name: "canary", Phase: policyhubv1.WaveDone, Since: ago(2 * time.Hour), Clusters: 1},
					// A wave no longer in the spec is not shown.
					{Name: "removed", Phase: policyhubv1.WaveDone},
				},
			}},
		},
		{
			// Not started by the hub yet, paused: "(paused)" on the first wave.
			ObjectMeta: metav1.ObjectMeta{Name: "disallow-latest-tag"},
			Spec:       policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Rollout: &policyhubv1.Rollout{Paused: true, Waves: []policyhubv1.RolloutWave{{Name: "staging"}, {Name: "prod"}}}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "no-privileged"},
			Spec:       policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Rollout: &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}}}}},
			Status: policyhubv1.FleetPolicyStatus{Rollout: &policyhubv1.RolloutStatus{Revision: "abc",
				Waves: []policyhubv1.WaveStatus{{Name: "all", Phase: policyhubv1.WavePending, Clusters: 4}}}},
		},
	}
	var all []rolled
	for i := range fps {
		all = append(all, rolledFleetPolicy(&fps[i]))
	}
	rows := rolloutRows(all, now)
	if len(rows) != 6 || rows[0].Policy != "disallow-latest-tag" || rows[2].Wave != "all" || !rows[4].Current {
		t.Fatalf("rows %+v", rows)
	}
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printRolloutTable(tw, rows)
	_ = tw.Flush()
	want := `POLICY                REVISION       WAVE      CURRENT   PHASE     CLUSTERS   FAIL   BLOCKED   LEGACY   SINCE   REASON
disallow-latest-tag   -              staging   -         Pending   -          -      -         -        -       (paused)
disallow-latest-tag   -              prod      -         Pending   -          -      -         -        -       -
no-privileged         abc            all       -         Pending   4          -      -         -        -       -
require-limits        3f2a9c1b7d0e   canary    -         Done      1          0      0         -        120m    -
require-limits        3f2a9c1b7d0e   staging   *         Waiting   3          2      1         3        5m      (paused) gate: fail 2 > maxFail 0, blocked 1 > maxBlocked 0
require-limits        3f2a9c1b7d0e   prod      -         Pending   -          -      -         -        -       -
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}

	// -o json: status.rollout by policy name, null before the hub started.
	out.Reset()
	if err := writeReport(&out, "json", rolloutStatusReport(all[2:4]), nil); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"disallow-latest-tag\": null,\n  \"no-privileged\": {\n    \"revision\": \"abc\",\n    \"waves\": [\n      {\n        \"name\": \"all\",\n        \"phase\": \"Pending\",\n        \"clusters\": 4\n      }\n    ]\n  }\n}\n"; out.String() != want {
		t.Errorf("json:\n%s\nwant\n%s", out.String(), want)
	}
}

func TestApproveWave(t *testing.T) {
	for _, tc := range []struct {
		name, value, wave, revision, want string
	}{
		{"first approval", "", "prod", "r2", "prod@r2"},
		{"other waves of the revision kept, sorted", "staging@r2", "prod", "r2", "prod@r2,staging@r2"},
		{"other revisions dropped", "staging@r1,prod@r1,canary@r2", "prod", "r2", "canary@r2,prod@r2"},
		{"idempotent", "prod@r2,staging@r2", "prod", "r2", "prod@r2,staging@r2"},
		{"duplicates, whitespace and malformed entries cleaned", " prod@r2 ,prod@r2,junk,,staging @ r2", "prod", "r2", "prod@r2,staging@r2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := approveWave(tc.value, tc.wave, tc.revision); got != tc.want {
				t.Errorf("approveWave(%q, %q, %q) = %q, want %q", tc.value, tc.wave, tc.revision, got, tc.want)
			}
		})
	}
}

// The commands' argument mistakes are usage errors, found before the hub is asked.
func TestRolloutUsage(t *testing.T) {
	for _, args := range [][]string{
		{"rollout", "bogus"},
		{"rollout", "approve", "team"},
		{"rollout", "approve", "ap/team", "prod"},
		{"rollout", "pause"},
		{"rollout", "resume", "a", "b"},
		{"rollout", "status", "x", "-o", "xml"},
	} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"--kubeconfig", "/nonexistent"}, args...), Streams{Out: &out, ErrOut: &errOut})
		if code != ExitError || out.Len() != 0 || !strings.Contains(errOut.String(), "(see --help)") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	for _, sub := range []string{"status", "approve", "pause", "resume"} {
		var out bytes.Buffer
		code := Run(t.Context(), []string{"rollout", sub, "--help"}, Streams{Out: &out, ErrOut: &out})
		if code != ExitOK || !strings.Contains(out.String(), "Examples:\n  ") || !strings.Contains(out.String(), "-o json|yaml prints {") {
			t.Errorf("rollout %s --help: exit %d\n%s", sub, code, out.String())
		}
	}
}

// A PolicySet's rollout is listed after the FleetPolicies', named as it is given: pset/NAME.
func TestRolloutRowsNamePolicySets(t *testing.T) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zeta"},
		Spec: policyhubv1.FleetPolicySpec{Delivery: policyhubv1.Delivery{Rollout: &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}}}}}}
	ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "alpha"},
		Spec:   policyhubv1.PolicySetSpec{Delivery: policyhubv1.Delivery{Rollout: &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "staging"}}}}},
		Status: policyhubv1.PolicySetStatus{Rollout: &policyhubv1.RolloutStatus{Revision: "0123456789abcdef"}}}
	all := []rolled{rolledPolicySet(ps), rolledFleetPolicy(fp)}
	rows := rolloutRows(all, time.Now())
	if len(rows) != 2 || rows[0].Policy != "zeta" || rows[1].Policy != "pset/alpha" || rows[1].Revision != "0123456789abcdef" {
		t.Fatalf("rows %+v", rows)
	}
	if report := rolloutStatusReport(all); report["pset/alpha"] == nil || report["zeta"] != nil {
		t.Fatalf("report %v", report)
	}
	for arg, want := range map[string]string{"pset/alpha": kindPolicySet, "zeta": kindFleetPolicy} {
		if ref, err := rolloutRef(arg); err != nil || ref.kind != want {
			t.Errorf("%s: %+v %v", arg, ref, err)
		}
	}
	if _, err := rolloutRef("ap/shop"); err == nil {
		t.Error("an ApplicationPolicy was taken as rolling out")
	}
}
