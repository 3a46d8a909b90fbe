package engine

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// emitEvents records the clusters whose phase changed or that were written to: a Warning per
// cluster in trouble, and one Normal Event for all the clusters that synced.
func emitSyncEvents(recorder events.EventRecorder, obj runtime.Object, before []policyhubv1.ClusterStatus, outcomes []Outcome) {
	prev := map[string]policyhubv1.ClusterPhase{}
	for _, s := range before {
		prev[s.Name] = s.Phase
	}
	var synced []string
	for _, o := range outcomes {
		if prev[o.Cluster] == o.Result.Phase && !o.Wrote {
			continue
		}
		switch o.Result.Phase {
		case policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseDryRun:
			synced = append(synced, fmt.Sprintf("%s (%s)", o.Cluster, o.Result.Message))
		case policyhubv1.ClusterPhasePending:
			// Not a problem, and not news: the cluster's result, when it comes, is announced.
		default:
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, string(o.Result.Phase), "Sync", "%s: %s", o.Cluster, o.Result.Message)
		}
	}
	if len(synced) > 0 {
		recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", policyhubv1.TruncateMessage(strings.Join(synced, "; "), 1024))
	}
}
