package collect

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func constraintWith(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sRequiredLabels",
		"metadata": map[string]any{"name": "must-have-team"}, "spec": map[string]any{},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func violation(kind, namespace, name, message string) any {
	v := map[string]any{"enforcementAction": "warn", "version": "v1", "kind": kind, "name": name, "message": message}
	if kind == "Deployment" {
		v["group"] = "apps"
	}
	if namespace != "" {
		v["namespace"] = namespace
	}
	return v
}

// A Constraint's digests say what Gatekeeper's audit stored: fail = totalViolations, the listed
// violations by resource, the rest about no resource; never a pass; nothing before an audit.
func TestConstraintDigests(t *testing.T) {
	key := PolicyKey{Engine: policyhubv1.EngineGatekeeper, Kind: "K8sRequiredLabels", Name: "must-have-team"}
	for _, tc := range []struct {
		name      string
		status    map[string]any
		fail      int32 // summed over digests
		resources int   // digests about a resource
		listed    int   // violations
	}{
		{"not audited yet", nil, 0, 0, 0},
		{"audited, none", map[string]any{"totalViolations": int64(0), "auditTimestamp": "2026-11-28T22:00:00Z"}, 0, 0, 0},
		{"all listed, one resource twice", map[string]any{"totalViolations": int64(3), "violations": []any{
			violation("Deployment", "default", "web", "missing team"), violation("Deployment", "default", "web", "bad team"),
			violation("Namespace", "", "legacy", "missing team")}}, 3, 2, 3},
		{"more counted than listed", map[string]any{"totalViolations": int64(25), "violations": []any{
			violation("Namespace", "", "a", "x"), violation("Namespace", "", "b", "x")}}, 25, 2, 2},
		{"more listed than counted", map[string]any{"totalViolations": int64(1), "violations": []any{
			violation("Namespace", "", "a", "x"), violation("Namespace", "", "b", "x")}}, 1, 1, 1},
		{"a negative total", map[string]any{"totalViolations": int64(-5)}, 0, 0, 0},
		{"a huge total", map[string]any{"totalViolations": int64(1) << 40}, 1<<31 - 1, 0, 0},
		{"a malformed violation", map[string]any{"totalViolations": int64(1), "violations": []any{"x"}}, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			digests := ConstraintDigests("K8sRequiredLabels", constraintWith(tc.status))
			var fail int32
			resources, listed := 0, 0
			for _, d := range digests {
				if len(d.Policies) != 1 || d.Policies[0].Policy() != key {
					t.Fatalf("digest %+v: want one entry of %v", d, key)
				}
				c := d.Policies[0].Counts
				if c.Pass != 0 || c.Warn != 0 || c.Error != 0 || c.Skip != 0 {
					t.Errorf("counts %+v: only fail is known", c)
				}
				fail += c.Fail
				if d.Resource != (Resource{}) {
					resources++
				}
				listed += len(d.Violations)
			}
			if fail != tc.fail || resources != tc.resources || listed != tc.listed {
				t.Errorf("fail %d, resources %d, violations %d; want %d, %d, %d", fail, resources, listed, tc.fail, tc.resources, tc.listed)
			}
			if _, audited := tc.status["totalViolations"]; audited && len(digests) == 0 {
				t.Errorf("an audited Constraint has no digest: it would not be listed")
			}
		})
	}
}

// What a cluster writes into a Constraint's status is bounded.
func TestConstraintDigestsBounded(t *testing.T) {
	many := make([]any, 0, 1000)
	for i := range 1000 {
		many = append(many, violation("Namespace", "", strings.Repeat("n", 300)+string(rune('a'+i%26)), strings.Repeat("m", 10000)))
	}
	digests := ConstraintDigests("K8sRequiredLabels", constraintWith(map[string]any{"totalViolations": int64(1000), "violations": many}))
	listed := 0
	for _, d := range digests {
		listed += len(d.Violations)
		for _, v := range d.Violations {
			if len(v.Message) > MaxMessage {
				t.Fatalf("a message of %d bytes kept", len(v.Message))
			}
		}
		if len(d.Resource.Name) > policyhubv1.MaxSummaryNameLength {
			t.Fatalf("a name of %d bytes kept", len(d.Resource.Name))
		}
	}
	if listed != MaxGatekeeperViolations {
		t.Errorf("%d violations kept, want %d", listed, MaxGatekeeperViolations)
	}
}
