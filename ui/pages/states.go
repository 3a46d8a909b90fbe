package pages

import (
	"strings"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

// clusterState is what the declarations' per-cluster state says of one cluster.
type clusterState struct {
	// notSynced counts declarations whose phase there is neither Synced nor DryRun; worst is the
	// worst phase of all.
	notSynced int
	worst     string
	// unreachable: the hub could not reach the cluster (it says so once, in every declaration).
	unreachable bool
}

// PhaseRank is how bad a phase is: higher is worse. The phases that need attention rank as
// everywhere else (ClusterPhase.ProblemRank); of the fine ones, a dry-run ranks above Synced.
func PhaseRank(p policyhubv1.ClusterPhase) int {
	if r := p.ProblemRank(); r > 0 {
		return r + 1
	}
	if p == policyhubv1.ClusterPhaseDryRun {
		return 1
	}
	return 0
}

func clusterStates(s *read.Snapshot) map[string]clusterState {
	states := map[string]clusterState{}
	for i := range s.Slices {
		for _, c := range s.Slices[i].Clusters {
			st := states[c.Name]
			if c.Phase != policyhubv1.ClusterPhaseSynced && c.Phase != policyhubv1.ClusterPhaseDryRun {
				st.notSynced++
			}
			if st.worst == "" || PhaseRank(c.Phase) > PhaseRank(policyhubv1.ClusterPhase(st.worst)) {
				st.worst = string(c.Phase)
			}
			if unreachable(c) {
				st.unreachable = true
			}
			states[c.Name] = st
		}
	}
	return states
}

// unreachable: the hub's message for a cluster it could not reach (hub/work's health check).
func unreachable(c policyhubv1.ClusterStatus) bool {
	return c.Phase == policyhubv1.ClusterPhaseFailed && strings.Contains(c.Message, ": unreachable: ")
}

// declarationsByPolicy maps the Kyverno policies the hub's declarations ship to their pages: a
// FleetPolicy's template (named after the FleetPolicy unless it names itself), and each
// ApplicationPolicy's generated policies. Keys without a kind match a summary that does not say it.
func declarationsByPolicy(s *read.Snapshot) map[policyKey]string {
	m := map[policyKey]string{}
	for i := range s.FleetPolicies {
		fp := &s.FleetPolicies[i]
		name := fp.Spec.Template.Metadata.Name
		if name == "" {
			name = fp.Name
		}
		url := DeclarationURL(policyhubv1.KindFleetPolicy, "", fp.Name)
		m[policyKey{fp.Spec.Template.Kind, fp.Spec.Template.Metadata.Namespace, name}] = url
		m[policyKey{"", fp.Spec.Template.Metadata.Namespace, name}] = url
	}
	for i := range s.ApplicationPolicies {
		ap := &s.ApplicationPolicies[i]
		url := DeclarationURL(policyhubv1.KindApplicationPolicy, ap.Namespace, ap.Name)
		for _, p := range ap.Status.Policies {
			m[policyKey{"", ap.Namespace, p.Policy}] = url
		}
	}
	return m
}
