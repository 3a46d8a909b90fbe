package controllers

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// CacheOptions are the hub manager's cache settings the reconcilers rely on: only the metadata
// of cluster-gateway's credential Secrets is cached, and only in their namespace (the hub never
// holds credentials). Only the PolicyReportSummaries the hub reads are cached, those named
// SummaryName: the CRD refuses other names, and where an older CRD does not, an agent's other
// objects cost the hub no memory, status write or Event. No reconciler reads managedFields, so
// the cache does not keep them: they are often the largest part of an object, and every read
// copies the object. Of the Leases, only the agents' are cached (AgentLeaseName), and of each only
// what liveness needs (see keepRenewal): an agent writes its Lease, and whatever it puts in one
// costs the hub no memory. Of the ConfigMaps, only the policy libraries in the hub's namespace
// (hubNamespace) are cached, those PolicySets read (labelled policyhubv1.LabelPolicyLibrary).
// A replica sharing the fleet (replica: its name; "" for a hub that does not share) caches only
// the summaries labelled as worked by it (see SummaryLabeler, whose own cache holds every
// summary's metadata): its memory grows with its share of the fleet, not with the fleet. Of a
// summary, only the metadata the hub reads is cached (see keepSummaryMeta): the agent writes its
// summary's labels and annotations, and what it puts there costs the hub no memory.
func CacheOptions(secretNamespace, hubNamespace, replica string) cache.Options {
	library, err := labels.NewRequirement(policyhubv1.LabelPolicyLibrary, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: cannot fail
	}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	summaries := cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", policyhubv1.SummaryName), Transform: keepSummaryMeta}
	if replica != "" {
		summaries.Label = labels.SelectorFromSet(labels.Set{policyhubv1.LabelWorkedBy: replica})
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			secretMeta:                         {Namespaces: map[string]cache.Config{secretNamespace: {}}},
			&policyhubv1.PolicyReportSummary{}: summaries,
			&corev1.ConfigMap{}:                {Namespaces: map[string]cache.Config{hubNamespace: {}}, Label: labels.NewSelector().Add(*library)},
			&coordinationv1.Lease{}:            {Field: fields.OneTermEqualSelector("metadata.name", policyhubv1.AgentLeaseName), Transform: keepRenewal},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// keepRenewal keeps of an agent's Lease what the hub reads: which cluster's it is, its
// resourceVersion (a change is a renewal) and its renewTime (the agent's own time, used only until
// the hub sees a renewal itself).
func keepRenewal(obj any) (any, error) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return obj, nil
	}
	kept := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: lease.Namespace, Name: lease.Name, UID: lease.UID, ResourceVersion: lease.ResourceVersion,
	}}
	kept.Spec.RenewTime = lease.Spec.RenewTime
	return kept, nil
}

// keepSummaryMeta keeps of a summary's metadata (a PolicyReportSummary's, or its
// PartialObjectMetadata) what the hub reads: its key, UID, resourceVersion and generation (what
// the status and Events refer to), its deletion, and of its labels only the replica working it
// (policyhubv1.LabelWorkedBy). The agent writes the rest: up to 256 KiB of annotations, labels,
// owner references and finalizers in every summary, which every replica would otherwise hold for
// every cluster (the summaries' metadata cache holds the whole fleet's).
func keepSummaryMeta(obj any) (any, error) {
	var meta *metav1.ObjectMeta
	switch o := obj.(type) {
	case *policyhubv1.PolicyReportSummary:
		meta = &o.ObjectMeta
	case *metav1.PartialObjectMetadata:
		meta = &o.ObjectMeta
	default:
		return obj, nil
	}
	kept := metav1.ObjectMeta{
		Namespace: meta.Namespace, Name: meta.Name, UID: meta.UID, ResourceVersion: meta.ResourceVersion,
		Generation: meta.Generation, CreationTimestamp: meta.CreationTimestamp, DeletionTimestamp: meta.DeletionTimestamp,
	}
	if replica, ok := meta.Labels[policyhubv1.LabelWorkedBy]; ok {
		kept.Labels = map[string]string{policyhubv1.LabelWorkedBy: replica}
	}
	*meta = kept
	return obj, nil
}

// ClientOptions make the manager's client read unstructured objects (OCM's PlacementDecisions)
// from its cache too: every reconcile reads the inventory, and listing it from the hub each time
// cost the hub apiserver two requests per reconcile.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}
