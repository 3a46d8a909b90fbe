package push

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// APIWrites are a Pusher's writes through the hub's API: each object applied whole once (creating
// it, and taking back what the agent owns should anyone have changed it), then patched (for the
// Lease, about 40 % less of the apiserver than an apply: docs/benchmarks.md, the quiet fleet).
// A patch that finds its object gone (deleted) applies it again.
type APIWrites struct {
	hub     client.Client
	cluster string
	// beat is the heartbeat a summary announces when its spec names none (the Pusher names its
	// current one).
	beat time.Duration
	// leaseApplied, summaryApplied: applied whole since this started.
	leaseApplied, summaryApplied bool
	// leaseBeat is the beat the Lease was last applied whole with: a renewal with another
	// applies it whole again, so its leaseDurationSeconds follows the heartbeat.
	leaseBeat time.Duration
}

// Renew applies the cluster's Lease with renewTime at, lasting three beats. Only spec's holder,
// duration and renew time are sent, so the agent owns nothing else of it.
//
// The first renewal applies the whole Lease (creating it, and taking its fields back should
// anyone have changed them), and so does the first with a new beat (its duration changes); later
// ones patch renewTime alone, which costs the hub's apiserver about 40 % less than an apply at a
// thousand agents (docs/benchmarks.md, the quiet fleet). A patch that finds no Lease (it was
// deleted) applies it again.
func (w *APIWrites) Renew(ctx context.Context, at time.Time, beat time.Duration) error {
	if beat != w.leaseBeat {
		w.leaseApplied = false
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.cluster, Name: LeaseName}}
	patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, metav1.NewMicroTime(at).Format(metav1.RFC3339Micro))
	patched, err := w.patchOrApply(ctx, &w.leaseApplied, "Lease "+w.cluster+"/"+LeaseName,
		lease, client.RawPatch(types.MergePatchType, []byte(patch)), leaseObject(w.cluster, at, beat))
	if err == nil && !patched {
		w.leaseBeat = beat
	}
	return err
}

// patchOrApply patches obj, once *applied says it was applied whole since this started; else, or
// when the patch finds it gone, applies it whole. patched says which: obj holds the patch's
// response, whole the apply's.
func (w *APIWrites) patchOrApply(ctx context.Context, applied *bool, what string, obj client.Object, patch client.Patch, whole runtime.ApplyConfiguration) (patched bool, err error) {
	if *applied {
		err := w.hub.Patch(ctx, obj, patch, client.FieldOwner(FieldManager))
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return true, fmt.Errorf("patch %s on the hub: %w", what, err)
			}
			return true, nil
		}
		*applied = false
	}
	if err := w.hub.Apply(ctx, whole, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %s on the hub: %w", what, err)
	}
	*applied = true
	return false, nil
}

// leaseObject is cluster's Lease applied at a renewal at: held by the cluster, lasting three
// heartbeats of beat (as kubelets' node Leases last several renew intervals), renewed at.
func leaseObject(cluster string, at time.Time, beat time.Duration) *coordinationv1ac.LeaseApplyConfiguration {
	return coordinationv1ac.Lease(LeaseName, cluster).WithSpec(coordinationv1ac.LeaseSpec().
		WithHolderIdentity(cluster).
		WithLeaseDurationSeconds(leaseDurationSeconds(beat)).
		WithRenewTime(metav1.NewMicroTime(at)))
}

// Summary writes spec as the cluster's summary on the hub, generated at at; it never writes
// status, and returns the pacing the hub publishes there, from the write's response (the whole
// object, for the apply as for the patch: no read is added).
//
// The first write applies the whole summary (creating it, and taking its spec back should anyone
// have changed it); later ones replace spec with a JSON patch, as the Lease's renewals patch. For
// the summary the verb hardly matters to the apiserver (docs/benchmarks.md, session 15's busy
// fleet: ~5 % less a write); the patch keeps every write of an agent after its first the same
// kind. A patch that finds no summary (it was deleted) applies it again.
func (w *APIWrites) Summary(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (PacingRead, error) {
	obj, err := w.summaryObject(spec, at)
	if err != nil {
		return PacingRead{}, err
	}
	patch, err := summaryPatch(obj)
	if err != nil {
		return PacingRead{}, err
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(obj.GroupVersionKind())
	target.SetNamespace(obj.GetNamespace())
	target.SetName(obj.GetName())
	patched, err := w.patchOrApply(ctx, &w.summaryApplied, "PolicyReportSummary "+w.cluster+"/"+SummaryName,
		target, client.RawPatch(types.JSONPatchType, patch), client.ApplyConfigurationFromUnstructured(obj))
	if err != nil {
		return PacingRead{}, err
	}
	response := obj
	if patched {
		response = target
	}
	return pacingOf(response), nil
}

// Pacing reads the pacing the hub publishes in the cluster's summary's status, from the
// apiserver's cache (resourceVersion 0: no etcd read; a pacing a moment old is as good).
func (w *APIWrites) Pacing(ctx context.Context) (PacingRead, bool, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind("PolicyReportSummary"))
	err := w.hub.Get(ctx, client.ObjectKey{Namespace: w.cluster, Name: SummaryName}, obj,
		&client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
	if apierrors.IsNotFound(err) {
		return PacingRead{}, false, nil
	}
	if err != nil {
		return PacingRead{}, false, fmt.Errorf("read PolicyReportSummary %s/%s on the hub: %w", w.cluster, SummaryName, err)
	}
	return pacingOf(obj), true, nil
}

// pacingOf is the summary obj's status.pacing, decoded. The schema types its intervals as mere
// strings, so one may not decode: that is said (Unreadable), not taken for none.
func pacingOf(obj *unstructured.Unstructured) PacingRead {
	raw, found, err := unstructured.NestedMap(obj.Object, "status", "pacing")
	if err != nil {
		return PacingRead{Unreadable: fmt.Sprintf("status.pacing: %v", err)}
	}
	if !found {
		return PacingRead{}
	}
	var pacing policyhubv1.SummaryPacing
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &pacing); err != nil {
		return PacingRead{Unreadable: fmt.Sprintf("status.pacing: %v", err)}
	}
	return PacingRead{Pacing: &pacing}
}

// summaryPatch is the JSON patch that replaces the summary obj's spec.
func summaryPatch(obj *unstructured.Unstructured) ([]byte, error) {
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec", "value": obj.Object["spec"]}})
	if err != nil {
		return nil, fmt.Errorf("push: encode the summary: %w", err)
	}
	return patch, nil
}

// SummaryBodies are the bodies an agent of cluster, renewing every beat, sends to write spec
// generated at at: the apply of the whole summary (its first write) and the JSON patch of its
// spec (every write after). Benchmarks measure them; nothing is sent.
func SummaryBodies(cluster string, beat time.Duration, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (apply, patch []byte, err error) {
	w := &APIWrites{cluster: cluster, beat: beat}
	obj, err := w.summaryObject(spec, at)
	if err != nil {
		return nil, nil, err
	}
	if apply, err = json.Marshal(obj.Object); err != nil {
		return nil, nil, fmt.Errorf("push: encode the summary: %w", err)
	}
	if patch, err = summaryPatch(obj); err != nil {
		return nil, nil, err
	}
	return apply, patch, nil
}

// summaryObject is the object applied: only apiVersion, kind, namespace, name and spec, so the
// agent owns nothing else (status is the hub's).
func (w *APIWrites) summaryObject(spec policyhubv1.PolicyReportSummarySpec, at time.Time) (*unstructured.Unstructured, error) {
	spec.Cluster = w.cluster
	generated := metav1.NewTime(at)
	spec.GeneratedAt = &generated
	if spec.HeartbeatInterval == nil || spec.HeartbeatInterval.Duration <= 0 {
		spec.HeartbeatInterval = &metav1.Duration{Duration: w.beat}
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, fmt.Errorf("push: encode the summary: %w", err)
	}
	// Zero counts and false are omitted from JSON. Applied as an empty object, a struct whose
	// fields this manager owned would lose them all and turn null on the hub, which the schema
	// refuses: every count and the webhook flag are sent explicitly.
	t := spec.Totals
	content["totals"] = map[string]any{"pass": t.Pass, "fail": t.Fail, "warn": t.Warn, "error": t.Error, "skip": t.Skip}
	engine, _ := content["engine"].(map[string]any)
	if engine == nil {
		engine = map[string]any{}
	}
	engine["kyvernoWebhooks"] = spec.Engine.KyvernoWebhooks
	content["engine"] = engine
	// spec.policies is a map list keyed by name, namespace and kind: the keys are sent even when
	// empty (the CRD defaults them), so the apply does not depend on the apiserver's defaulting
	// of list keys.
	if policies, ok := content["policies"].([]any); ok {
		for _, p := range policies {
			if entry, ok := p.(map[string]any); ok {
				for _, key := range []string{"namespace", "kind"} {
					if _, set := entry[key]; !set {
						entry[key] = ""
					}
				}
			}
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": content}}
	obj.SetAPIVersion(policyhubv1.GroupVersion.String())
	obj.SetKind("PolicyReportSummary")
	obj.SetNamespace(w.cluster)
	obj.SetName(SummaryName)
	return obj, nil
}
