package work

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// Whether a policy is in force: its engine's own word, from the policy's status. Kyverno marks a
// policy ready once its admission webhooks are programmed for it; until then a resource the
// policy forbids is still admitted. Gatekeeper says so per pod (gatekeeperReady). A declaration
// is in force in a cluster once every policy of it there is ready.

// reportsReadiness reports whether Kyverno writes a readiness into the status of policies of the
// kind. The others (exceptions, cleanup policies) are in force once written.
func reportsReadiness(gk schema.GroupKind) bool {
	switch gk.Group {
	case "kyverno.io":
		return gk.Kind == "ClusterPolicy" || gk.Kind == "Policy"
	case "policies.kyverno.io":
		return gk.Kind != "PolicyException"
	case policyhubv1.GatekeeperTemplateGroup:
		return gk.Kind == "ConstraintTemplate"
	case policyhubv1.GatekeeperConstraintGroup:
		return true
	}
	return false
}

// engineReady reads the policy's engine's word on whether it is in force: Kyverno's or
// Gatekeeper's (gatekeeper.go).
func engineReady(u *unstructured.Unstructured) (ready, known bool) {
	switch u.GroupVersionKind().Group {
	case policyhubv1.GatekeeperTemplateGroup, policyhubv1.GatekeeperConstraintGroup:
		return gatekeeperReady(u)
	}
	return kyvernoReady(u)
}

// kyvernoReady reads Kyverno's readiness from a policy's status: the Ready condition of the
// kyverno.io kinds, status.conditionStatus.ready of the policies.kyverno.io ones. known is false
// while Kyverno has said nothing.
func kyvernoReady(u *unstructured.Unstructured) (ready, known bool) {
	if u.GroupVersionKind().Group == "policies.kyverno.io" {
		ready, known, _ = unstructured.NestedBool(u.Object, "status", "conditionStatus", "ready")
		return ready, known
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True", true
		}
	}
	return false, false
}

// readiness is what the watch caches keep of a policy's status: Kyverno's readiness alone, in a
// status of its own shape, {ready: bool}, shared by every cached object (never changed).
type readiness struct {
	ready, notReady map[string]any
}

func newReadiness() readiness {
	return readiness{ready: map[string]any{"ready": true}, notReady: map[string]any{"ready": false}}
}

// keep replaces u's status by its readiness, or drops it when Kyverno has said nothing.
func (r readiness) keep(u *unstructured.Unstructured) {
	ready, known := engineReady(u)
	switch {
	case !known:
		delete(u.Object, "status")
	case ready:
		u.Object["status"] = r.ready
	default:
		u.Object["status"] = r.notReady
	}
}

// cachedReady reports whether a cached object (see keep) is ready.
func cachedReady(u *unstructured.Unstructured) bool {
	ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
	return ready
}

// unconfirmed lists the objects of d, synced in the cluster, that Kyverno there has not reported
// ready yet, as the cluster's watch cache has them. It reads only kinds the cache already
// watches for changes (so that it never waits for a new informer, and a later change reaches
// Workers.ownedChanged); an object of another kind, or not cached yet, is unconfirmed. In a
// flooded cluster (no cache) it is what the pass's direct read found.
func (s *Syncer) unconfirmed(ctx context.Context, cluster string, d Declaration) map[plan.Key]bool {
	s.mu.Lock()
	cc := s.clients[cluster]
	flooded := s.floods[cluster]
	s.mu.Unlock()
	waiting := map[plan.Key]bool{}
	for _, obj := range d.Objects {
		gvk := obj.GroupVersionKind()
		if !reportsReadiness(gvk.GroupKind()) || policyhubv1.IsShadow(obj.GetLabels()) {
			continue // a shadow is never in force: whether Kyverno took it is the preview's business
		}
		key := plan.KeyOf(obj)
		if flooded != nil {
			if !flooded.readyAt(key) {
				waiting[key] = true
			}
			continue
		}
		if cc == nil {
			waiting[key] = true
			continue
		}
		if _, watched := cc.watched.Load(gvk.GroupKind()); !watched {
			waiting[key] = true
			continue
		}
		live := &unstructured.Unstructured{}
		// At the version the pass sent it (versions.go), which the cache watches.
		live.SetGroupVersionKind(servedGVK(cc.client.RESTMapper(), gvk))
		err := cc.cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, live, client.UnsafeDisableDeepCopy)
		if err != nil || !cachedReady(live) {
			waiting[key] = true
		}
	}
	return waiting
}

// onlyShadows says whether everything d ships to the cluster is a preview's shadow.
func onlyShadows(d Declaration) bool {
	for _, obj := range d.Objects {
		if !policyhubv1.IsShadow(obj.GetLabels()) {
			return false
		}
	}
	return len(d.Objects) > 0
}
