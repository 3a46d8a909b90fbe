package app

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// liveness is what the CLI knows of the agents' heartbeats: their Leases' renewals, when the
// user may read Leases; otherwise the hub's own verdict in each summary's Ready condition.
type liveness struct {
	// renewed is each cluster's agent Lease renewTime, never later than now (the cluster's clock:
	// one behind only makes the agent look older). Nil: the Leases could not be read.
	renewed map[string]time.Time
}

// agentLiveness reads the agents' Leases (policyhubv1.AgentLeaseName in each cluster namespace)
// in one request. A user who may not list Leases gets the hub's verdict instead; that is not an
// error.
func agentLiveness(ctx context.Context, c client.Client, now time.Time) (liveness, error) {
	list := &coordinationv1.LeaseList{}
	if err := c.List(ctx, list, client.MatchingFields{"metadata.name": policyhubv1.AgentLeaseName}); err != nil {
		if apierrors.IsForbidden(err) {
			return liveness{}, nil
		}
		return liveness{}, fmt.Errorf("list the agents' Leases: %w", err)
	}
	l := liveness{renewed: make(map[string]time.Time, len(list.Items))}
	for i := range list.Items {
		lease := &list.Items[i]
		if t := lease.Spec.RenewTime; t != nil && lease.Name == policyhubv1.AgentLeaseName {
			at := t.Time
			if at.After(now) {
				at = now
			}
			l.renewed[lease.Namespace] = at
		}
	}
	return l, nil
}

// stale says whether the cluster's agent has missed three heartbeats at now.
func (l liveness) stale(s *policyhubv1.PolicyReportSummary, now time.Time) bool {
	if l.renewed != nil {
		return aggregate.Stale(s, l.renewed[s.Namespace], now)
	}
	// The hub judged it (it writes the verdict when it changes); a summary it has not judged yet
	// is judged from the summary alone.
	if ready := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady); ready != nil && ready.ObservedGeneration == s.Generation {
		return ready.Reason == policyhubv1.ReasonStale
	}
	return aggregate.Stale(s, time.Time{}, now)
}

// age is how long ago the cluster's agent was last heard from: its summary or its Lease.
func (l liveness) age(s *policyhubv1.PolicyReportSummary, now time.Time) time.Duration {
	return aggregate.Age(s, l.renewed[s.Namespace], now)
}
