package ui

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

// syntheticFleet is a hub's state with clusters × policies: every cluster reports every policy,
// a fifth of the cells fail (skewed: some clusters and policies much more than others), and each
// policy is a FleetPolicy whose slices hold every cluster's state.
func syntheticFleet(clusters, policies int, now time.Time) *read.Snapshot {
	s := &read.Snapshot{Now: now, Clusters: map[string]map[string]string{}}
	kinds := []string{"ClusterPolicy", "ValidatingPolicy"}
	severities := []string{"low", "medium", "high", "critical"}
	categories := []string{"Pod Security", "Best Practices", "Supply Chain", "Multi-Tenancy", "Other"}
	observed := metav1.NewMicroTime(now.Add(-time.Minute))
	for c := range clusters {
		name := fmt.Sprintf("cluster-%04d", c)
		s.Clusters[name] = map[string]string{"env": []string{"prod", "staging", "dev"}[c%3], "region": fmt.Sprintf("region-%d", c%10)}
		sum := policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: policyhubv1.SummaryName, Generation: 1}}
		sum.Status.ObservedGeneration, sum.Status.ObservedTime = 1, &observed
		for p := range policies {
			r := policyhubv1.ResultCounts{Pass: int64(20 + p%7)}
			if (c+p)%5 == 0 {
				r.Fail = int64((c*p)%97 + c%13)
			}
			sum.Spec.Policies = append(sum.Spec.Policies, policyhubv1.PolicySummary{
				Name: fmt.Sprintf("policy-%03d", p), Kind: kinds[p%2], Severity: severities[p%4], Category: categories[p%5], Results: r,
			})
			sum.Spec.Totals.Fail += r.Fail
			sum.Spec.Totals.Pass += r.Pass
		}
		s.Summaries = append(s.Summaries, sum)
	}
	for p := range policies {
		name := fmt.Sprintf("policy-%03d", p)
		fp := policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		fp.Spec.Template.Kind = kinds[p%2]
		s.FleetPolicies = append(s.FleetPolicies, fp)
		for first := 0; first < clusters; first += policyhubv1.MaxClustersPerSlice {
			sl := policyhubv1.ClusterStatusSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "policyhub-system", Name: fmt.Sprintf("%s-%d", name, first)},
				Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: name}}
			for c := first; c < min(clusters, first+policyhubv1.MaxClustersPerSlice); c++ {
				phase := policyhubv1.ClusterPhaseSynced
				if c%101 == 0 && p == 0 {
					phase = policyhubv1.ClusterPhaseFailed
				}
				sl.Clusters = append(sl.Clusters, policyhubv1.ClusterStatus{Name: fmt.Sprintf("cluster-%04d", c), Phase: phase})
			}
			s.Slices = append(s.Slices, sl)
		}
	}
	return s
}

// staticSource serves one snapshot, and full summaries from it.
type staticSource struct {
	snap   *read.Snapshot
	full   map[string]*policyhubv1.PolicyReportSummary
	broker *read.Broker
}

func (s *staticSource) Snapshot(context.Context, time.Time) (*read.Snapshot, error) {
	return s.snap, nil
}

func (s *staticSource) Summary(_ context.Context, cluster string) (*policyhubv1.PolicyReportSummary, error) {
	if f, ok := s.full[cluster]; ok {
		return f, nil
	}
	for i := range s.snap.Summaries {
		if s.snap.Summaries[i].Namespace == cluster {
			return &s.snap.Summaries[i], nil
		}
	}
	return nil, notFound(cluster)
}

func (s *staticSource) Subscribe() *read.Subscription { return s.broker.Subscribe() }

func notFound(cluster string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: policyhubv1.GroupVersion.Group, Resource: "policyreportsummaries"}, cluster)
}
