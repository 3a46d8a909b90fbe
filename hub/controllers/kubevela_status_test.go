package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The compact status mirrored into an Application: per-cluster violations only where there are
// some and for at most maxMirroredClusters clusters, the refusals summed over every policy and
// cluster with the most recent one's message, and Ready's reason and message, cut.
func TestApplicationPolicyStatus(t *testing.T) {
	at := func(minute int) *metav1.Time {
		return &metav1.Time{Time: time.Date(2026, 11, 24, 10, minute, 0, 0, time.UTC)}
	}
	ap := &policyhubv1.ApplicationPolicy{}
	ap.Name = "shop-limits"
	ap.Status.Summary = policyhubv1.StatusSummary{Clusters: 30, Synced: 29, Violations: 40}
	ap.Status.Conditions = []metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "SyncFailed", Message: strings.Repeat("m", 300)}}
	var clusters []policyhubv1.ClusterStatus
	for i := range 30 {
		c := policyhubv1.ClusterStatus{Name: fmt.Sprintf("cluster-%02d", i)}
		if i%6 != 5 { // 25 clusters with violations, 5 without
			c.Results = &policyhubv1.ResultCounts{Fail: 1, Error: int64(i % 2)}
		} else {
			c.Results = &policyhubv1.ResultCounts{Pass: 3}
		}
		clusters = append(clusters, c)
	}
	ap.Status.Policies = []policyhubv1.ApplicationPolicyResult{
		{Cluster: "cluster-00", Policy: "shop-limits", Blocked: 2, LastBlocked: &policyhubv1.BlockedAdmission{Message: "later refusal", Time: at(30)}},
		{Cluster: "cluster-01", Policy: "shop-limits", Blocked: 3, LastBlocked: &policyhubv1.BlockedAdmission{Message: "earlier refusal", Time: at(10)}},
		{Cluster: "cluster-02", Policy: "shop-limits"},
	}

	got := applicationPolicyStatus(ap, clusters)
	if got["applicationPolicy"] != "shop-limits" || got["clusters"] != int64(30) || got["synced"] != int64(29) || got["violations"] != int64(40) {
		t.Errorf("counts: %v", got)
	}
	if got["ready"] != false || got["reason"] != "SyncFailed" || len(got["message"].(string)) > 256 {
		t.Errorf("ready %v, reason %v, message of %d bytes (at most 256)", got["ready"], got["reason"], len(got["message"].(string)))
	}
	byCluster := got["violationsByCluster"].(map[string]any)
	if len(byCluster) != maxMirroredClusters {
		t.Errorf("%d clusters in violationsByCluster, want the bound %d", len(byCluster), maxMirroredClusters)
	}
	if byCluster["cluster-01"] != int64(2) || byCluster["cluster-05"] != nil {
		t.Errorf("violationsByCluster counts fail+error where there are some: %v", byCluster)
	}
	if got["blocked"] != int64(5) || got["lastBlocked"] != "later refusal" {
		t.Errorf("blocked %v, lastBlocked %q; want 5 and the most recent refusal's message", got["blocked"], got["lastBlocked"])
	}

	ap.Status.Policies = nil
	if got := applicationPolicyStatus(ap, clusters); got["blocked"] != nil || got["lastBlocked"] != nil {
		t.Errorf("nothing refused, yet blocked %v, lastBlocked %v", got["blocked"], got["lastBlocked"])
	}
}
