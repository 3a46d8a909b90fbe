package e2e

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// kyvernoAdmissionDeployment is the name Kyverno's Helm chart gives its admission controller's
// Deployment (release kyverno), in the fleet's Kyverno namespace.
const kyvernoAdmissionDeployment = "kyverno-admission-controller"

// servedPolicyAPIs returns the kyverno.io and policies.kyverno.io group/versions the cluster
// serves, sorted, asked of its apiserver directly.
func servedPolicyAPIs(t *testing.T, cluster string) ([]string, error) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", cluster, err)
	}
	var apis []string
	for _, g := range groups.Groups {
		if g.Name == "kyverno.io" || g.Name == "policies.kyverno.io" {
			for _, v := range g.Versions {
				apis = append(apis, v.GroupVersion)
			}
		}
	}
	slices.Sort(apis)
	return apis, nil
}

// engineOf reads the cluster's summary's spec.engine on the hub.
func engineOf(t *testing.T, cluster string) (policyhubv1.EngineInfo, error) {
	t.Helper()
	s, err := hubSummaryOf(t, cluster)
	if err != nil {
		return policyhubv1.EngineInfo{}, err
	}
	return s.Spec.Engine, nil
}
