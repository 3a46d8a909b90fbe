package controllers

// The KubeVela side of an ApplicationPolicy: its status mirrored into the KubeVela
// Application's status.policy (served.go finds whether the hub serves Applications).

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// maxMirroredClusters bounds the per-cluster violation counts mirrored into an Application.
const maxMirroredClusters = 20

// applicationPolicyStatus is the compact status mirrored into a KubeVela Application's
// status.policy entry: enough for `vela status` and dashboards, bounded.
func applicationPolicyStatus(ap *policyhubv1.ApplicationPolicy, clusters []policyhubv1.ClusterStatus) map[string]any {
	ready := apimeta.FindStatusCondition(ap.Status.Conditions, policyhubv1.ConditionReady)
	out := map[string]any{
		"applicationPolicy": ap.Name,
		"clusters":          int64(ap.Status.Summary.Clusters),
		"synced":            int64(ap.Status.Summary.Synced),
		"violations":        ap.Status.Summary.Violations,
	}
	if ready != nil {
		out["ready"] = ready.Status == "True"
		out["reason"] = ready.Reason
		out["message"] = policyhubv1.TruncateMessage(ready.Message, 256)
	}
	// Violations per cluster, only where there are some, and bounded.
	byCluster := map[string]any{}
	for _, c := range clusters {
		if c.Results != nil && len(byCluster) < maxMirroredClusters {
			if v := aggregate.AddCount(c.Results.Fail, c.Results.Error); v > 0 {
				byCluster[c.Name] = v
			}
		}
	}
	if len(byCluster) > 0 {
		out["violationsByCluster"] = byCluster
	}
	// The most recent refusal over every policy and cluster.
	var blocked int64
	var last *policyhubv1.BlockedAdmission
	for _, p := range ap.Status.Policies {
		blocked = aggregate.AddCount(blocked, p.Blocked)
		if b := p.LastBlocked; b != nil && b.Message != "" && (last == nil || last.Time == nil || (b.Time != nil && b.Time.After(last.Time.Time))) {
			last = b
		}
	}
	if blocked > 0 {
		out["blocked"] = blocked
		out["lastBlocked"] = ""
		if last != nil {
			out["lastBlocked"] = policyhubv1.TruncateMessage(last.Message, 256)
		}
	}
	return out
}

// mirror writes the ApplicationPolicy's compact status into its KubeVela Application's
// status.policy entry, when it changed and not more often than ApplicationStatusInterval per
// Application (each write makes KubeVela reconcile the Application). It never touches the
// Application's conditions. It returns when to try again if it had to wait (zero otherwise).
func (r *ApplicationPolicyReconciler) mirror(ctx context.Context, ap *policyhubv1.ApplicationPolicy, clusters []policyhubv1.ClusterStatus, app *unstructured.Unstructured) time.Duration {
	entry := ap.Annotations[policyhubv1.AnnotationKubeVelaPolicyEntry]
	if app == nil || entry == "" {
		return 0
	}
	want := map[string]any{"name": entry, "type": policyhubv1.KubeVelaPolicyType, "status": applicationPolicyStatus(ap, clusters)}
	policies, _, _ := unstructured.NestedSlice(app.Object, "status", "policy")
	updated := make([]any, 0, len(policies)+1)
	found := false
	for _, p := range policies {
		if m, ok := p.(map[string]any); ok && m["name"] == entry && m["type"] == policyhubv1.KubeVelaPolicyType {
			if equality.Semantic.DeepEqual(normalize(m), normalize(want)) {
				return 0 // unchanged: no write
			}
			found = true
			updated = append(updated, want)
			continue
		}
		updated = append(updated, p)
	}
	if !found {
		updated = append(updated, want)
	}
	interval := r.ApplicationStatusInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	key := types.NamespacedName{Namespace: app.GetNamespace(), Name: app.GetName()}
	if wait := r.appWrites.wait(key, interval, time.Now()); wait > 0 {
		return wait
	}
	// A merge patch of status.policy only, guarded by the resourceVersion read: KubeVela writes
	// the rest of the status, and a concurrent write of it must not be overwritten.
	patch := app.DeepCopy()
	if err := unstructured.SetNestedSlice(patch.Object, updated, "status", "policy"); err != nil {
		log.FromContext(ctx).Error(err, "mirror status into the application")
		return 0
	}
	if err := r.Client.Status().Patch(ctx, patch, client.MergeFromWithOptions(app, client.MergeFromWithOptimisticLock{})); err != nil {
		log.FromContext(ctx).Error(err, "mirror status into the application", "application", key)
		return time.Second
	}
	r.appWrites.wrote(key, time.Now())
	return 0
}

// normalize round-trips a status entry through JSON types, so a freshly built entry compares
// equal to the same entry read back from the API.
func normalize(m map[string]any) map[string]any {
	data, err := json.Marshal(m)
	if err != nil {
		return m
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return m
	}
	return out
}

// appWriteClock remembers when each Application's status was last written.
type appWriteClock struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// wait is how long to wait before writing the Application again (zero: write now).
func (c *appWriteClock) wait(key types.NamespacedName, interval time.Duration, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.last[key]; ok && now.Sub(at) < interval {
		return interval - now.Sub(at)
	}
	return 0
}

func (c *appWriteClock) wrote(key types.NamespacedName, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.NamespacedName]time.Time{}
	}
	c.last[key] = at
}
