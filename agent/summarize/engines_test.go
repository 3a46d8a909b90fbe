package summarize

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A ValidatingAdmissionPolicy's results and refusals (counted from the API server's metrics:
// no admission named) are a policy of engine Kubernetes, its application attributed by UID,
// without a last blocked admission.
func TestKubernetesEngineResultsAndRefusals(t *testing.T) {
	key := collect.PolicyKey{Engine: policyhubv1.EngineKubernetes, Kind: "ValidatingAdmissionPolicy", Name: "vap-team"}
	s := collect.Snapshot{
		Digests: []*collect.Digest{{Resource: collect.Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "u1"},
			Policies:   []collect.PolicyCounts{collect.NewPolicyCounts(key, "", "", collect.Counts{Fail: 1})},
			Violations: []collect.Violation{{Policy: key, Rule: "vap-team", Result: "fail", Message: "ValidatingAdmissionPolicy 'vap-team' with binding 'vap-team' denied request: no"}}}},
		Blocks:       []*collect.Block{{Policy: key, Count: 3}},
		Policies:     map[collect.PolicyKey]collect.PolicyInfo{key: {}},
		Applications: map[types.UID]string{"u1": "shop"},
	}
	spec := Summarize(s, Options{Cluster: "c1"})
	if len(spec.Policies) != 1 {
		t.Fatalf("policies %+v", spec.Policies)
	}
	p := spec.Policies[0]
	if p.Engine != policyhubv1.EngineKubernetes || p.Kind != "ValidatingAdmissionPolicy" || p.Results.Fail != 1 || p.Blocked != 3 || p.LastBlocked != nil {
		t.Errorf("policy %+v: want engine Kubernetes, 1 fail, 3 blocked, no last blocked", p)
	}
	if len(spec.Applications) != 1 || spec.Applications[0].Name != "shop" || spec.Applications[0].Results.Fail != 1 {
		t.Errorf("applications %+v", spec.Applications)
	}
	if len(spec.Violations) != 1 || spec.Violations[0].Message != s.Digests[0].Violations[0].Message {
		t.Errorf("violations %+v", spec.Violations)
	}
	if err := spec.Validate(); err != nil {
		t.Errorf("the hub refuses it: %v", err)
	}
}
