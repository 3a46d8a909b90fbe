package read

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
)

// Options say whose hub to read and how.
type Options struct {
	// Config reaches the hub with the user's own credentials: their RBAC is the view's.
	Config *rest.Config
	// GatewaySecretNamespace is cluster-gateway's credential-Secret namespace (the inventory).
	GatewaySecretNamespace string
	// Namespace is where namespaced kinds are read when the user may not list them in every
	// namespace ("" reads nothing of such a kind).
	Namespace string
	Log       logr.Logger
}

// Reader holds the hub's state the pages show, kept current by one watch per kind.
type Reader struct {
	cache  cache.Cache
	direct client.Client
	broker *Broker
	scope  Scope
	kinds  []kind
}

// Start reads the hub: it asks which kinds the user may list, starts a watch for each, and
// returns once every watch has its first state (or ctx ends). The watches stop with ctx.
func Start(ctx context.Context, o Options) (*Reader, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	direct, err := client.New(o.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	r := &Reader{direct: direct, broker: NewBroker()}
	r.kinds, r.scope, err = allowedKinds(ctx, direct, o.GatewaySecretNamespace, o.Namespace)
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, k := range r.kinds {
		by := cache.ByObject{Field: k.field, Transform: k.transform}
		if k.namespace != "" {
			by.Namespaces = map[string]cache.Config{k.namespace: {}}
		}
		byObject[k.object()] = by
	}
	r.cache, err = cache.New(o.Config, cache.Options{
		Scheme:           scheme,
		ByObject:         byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	served := r.kinds[:0]
	for _, k := range r.kinds {
		informer, err := r.cache.GetInformer(ctx, k.object(), cache.BlockUntilSynced(false))
		if meta.IsNoMatchError(err) && k.optional {
			continue // OCM is not installed on this hub
		}
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", k.name, err)
		}
		topic := k.topic
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.publish(topic, obj) },
			UpdateFunc: func(_, obj any) { r.publish(topic, obj) },
			DeleteFunc: func(obj any) { r.publish(topic, obj) },
		}); err != nil {
			return nil, fmt.Errorf("watch %s: %w", k.name, err)
		}
		served = append(served, k)
	}
	r.kinds = served
	go func() {
		if err := r.cache.Start(ctx); err != nil {
			o.Log.Error(err, "hub cache stopped")
		}
	}()
	if !r.cache.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("read the hub: %w", errors.Join(ctx.Err(), errors.New("watches did not sync")))
	}
	return r, nil
}

func (r *Reader) publish(topic func(client.Object) []string, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	for _, t := range topic(o) {
		r.broker.Publish(t)
	}
}

// Subscribe follows the hub's changes (see Topics).
func (r *Reader) Subscribe() *Subscription { return r.broker.Subscribe() }

// Scope is what the user may read.
func (r *Reader) Scope() Scope { return r.scope }

// Summary reads one cluster's whole summary (violations included, which the cache leaves out):
// one request, for the page of that cluster.
func (r *Reader) Summary(ctx context.Context, cluster string) (*policyhubv1.PolicyReportSummary, error) {
	s := &policyhubv1.PolicyReportSummary{}
	if err := r.direct.Get(ctx, client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, s); err != nil {
		return nil, fmt.Errorf("read the summary of cluster %s: %w", cluster, err)
	}
	return s, nil
}

// Snapshot is the hub's state as the cache holds it. Its objects are shared with the cache: read
// them, never change them.
type Snapshot struct {
	Now                 time.Time
	Scope               Scope
	FleetPolicies       []policyhubv1.FleetPolicy
	PolicySets          []policyhubv1.PolicySet
	ApplicationPolicies []policyhubv1.ApplicationPolicy
	Exceptions          []policyhubv1.FleetPolicyException
	Slices              []policyhubv1.ClusterStatusSlice
	// Summaries hold counts only: no violations, exceptions or last refusals (Summary has them).
	Summaries []policyhubv1.PolicyReportSummary
	// Clusters are the inventory's clusters and their labels.
	Clusters map[string]map[string]string
}

// Snapshot reads the cache: no request to the hub.
func (r *Reader) Snapshot(ctx context.Context, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Now: now, Scope: r.scope, Clusters: map[string]map[string]string{}}
	shared := client.UnsafeDisableDeepCopy
	type listing struct {
		list client.ObjectList
		keep func()
	}
	var lists []listing
	fps, pss, aps := &policyhubv1.FleetPolicyList{}, &policyhubv1.PolicySetList{}, &policyhubv1.ApplicationPolicyList{}
	exs, css, sums := &policyhubv1.FleetPolicyExceptionList{}, &policyhubv1.ClusterStatusSliceList{}, &policyhubv1.PolicyReportSummaryList{}
	for _, k := range r.kinds {
		switch k.name {
		case kindFleetPolicies:
			lists = append(lists, listing{fps, func() { s.FleetPolicies = fps.Items }})
		case kindPolicySets:
			lists = append(lists, listing{pss, func() { s.PolicySets = pss.Items }})
		case kindApplicationPolicies:
			lists = append(lists, listing{aps, func() { s.ApplicationPolicies = aps.Items }})
		case kindExceptions:
			lists = append(lists, listing{exs, func() { s.Exceptions = exs.Items }})
		case kindSlices:
			lists = append(lists, listing{css, func() { s.Slices = css.Items }})
		case kindSummaries:
			lists = append(lists, listing{sums, func() { s.Summaries = sums.Items }})
		case kindSecrets, kindManagedClusters:
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
			lists = append(lists, listing{list, func() { addLabels(s.Clusters, list.Items) }})
		}
	}
	for _, l := range lists {
		if err := r.cache.List(ctx, l.list, shared); err != nil {
			return nil, fmt.Errorf("read the cache: %w", err)
		}
		l.keep()
	}
	return s, nil
}

// addLabels adds the inventory's objects (Secrets, ManagedClusters) to clusters, by name.
func addLabels(clusters map[string]map[string]string, objects []metav1.PartialObjectMetadata) {
	for _, m := range objects {
		labels := clusters[m.Name]
		if labels == nil {
			labels = map[string]string{}
			clusters[m.Name] = labels
		}
		maps.Copy(labels, m.Labels)
		delete(labels, gateway.CredentialTypeLabel)
	}
}

// The kinds the view reads, by name.
const (
	kindFleetPolicies       = "fleetpolicies"
	kindPolicySets          = "policysets"
	kindApplicationPolicies = "applicationpolicies"
	kindExceptions          = "fleetpolicyexceptions"
	kindSlices              = "clusterstatusslices"
	kindSummaries           = "policyreportsummaries"
	kindSecrets             = "secrets"
	kindManagedClusters     = "managedclusters"
)

// kind is one watch.
type kind struct {
	name string // resource, as RBAC names it
	gvk  schema.GroupVersionKind
	// namespaced kinds are read in namespace only when set.
	namespaced bool
	namespace  string
	field      fields.Selector
	transform  toolscache.TransformFunc
	topic      func(client.Object) []string
	// metadata: only the objects' metadata is read.
	metadata bool
	// optional: a hub without the kind (OCM not installed) is read without it.
	optional bool
	// newObject makes an object of a declaration kind (nil for the others).
	newObject func() policyhubv1.Declaration
}

func (k kind) object() client.Object {
	if k.metadata {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(k.gvk)
		return m
	}
	if k.newObject != nil {
		return k.newObject()
	}
	switch k.name {
	case kindSlices:
		return &policyhubv1.ClusterStatusSlice{}
	default:
		return &policyhubv1.PolicyReportSummary{}
	}
}

// watchedKinds are every kind the view reads, before the user's rights narrow them.
func watchedKinds(secretNamespace string) []kind {
	hub := policyhubv1.GroupVersion
	declaration := func(kind string) func(client.Object) []string {
		return func(o client.Object) []string { return []string{DeclarationTopic(kind, o.GetNamespace(), o.GetName())} }
	}
	// The declaration kinds, as the API lists them; one that ships no policies of its own (an
	// exception) is also its target's news.
	var kinds []kind
	for _, d := range policyhubv1.DeclarationKinds() {
		topic := exceptionTopics
		if d.ShipsPolicies {
			topic = declaration(d.Kind)
		}
		kinds = append(kinds, kind{name: d.Plural, gvk: hub.WithKind(d.Kind), namespaced: d.Namespaced, topic: topic, newObject: d.New})
	}
	return append(kinds, []kind{
		{name: kindSlices, gvk: hub.WithKind("ClusterStatusSlice"), namespaced: true, topic: sliceTopics},
		{name: kindSummaries, gvk: hub.WithKind("PolicyReportSummary"), namespaced: true,
			field: fields.OneTermEqualSelector("metadata.name", policyhubv1.SummaryName), transform: countsOnly,
			topic: func(o client.Object) []string { return []string{ClusterTopic(o.GetNamespace())} }},
		{name: kindSecrets, gvk: corev1.SchemeGroupVersion.WithKind("Secret"), metadata: true, namespaced: true, namespace: secretNamespace,
			topic: func(client.Object) []string { return []string{TopicInventory} }},
		{name: kindManagedClusters, gvk: clusterv1.GroupVersion.WithKind("ManagedCluster"), metadata: true, optional: true,
			topic: func(client.Object) []string { return []string{TopicInventory} }},
	}...)
}

func exceptionTopics(o client.Object) []string {
	topics := []string{ExceptionTopic(o.GetNamespace(), o.GetName())}
	if ex, ok := o.(*policyhubv1.FleetPolicyException); ok {
		topics = append(topics, DeclarationTopic(ex.Spec.Target.Kind, "", ex.Spec.Target.Name))
	}
	return topics
}

// sliceTopics: a slice is its declaration's state, and names the clusters it holds.
func sliceTopics(o client.Object) []string {
	s, ok := o.(*policyhubv1.ClusterStatusSlice)
	if !ok {
		return nil
	}
	ns := ""
	if s.Declaration.Kind == policyhubv1.KindApplicationPolicy {
		ns = s.Namespace
	}
	return []string{DeclarationTopic(s.Declaration.Kind, ns, s.Declaration.Name)}
}

// countsOnly keeps of a summary what the pages that show many clusters at once read: its
// counts per policy and per application, its liveness and the hub's verdict (none of the labels
// and annotations its agent writes). Violations, exceptions and last refusals, most of a full
// summary, are read for one cluster at a time (Reader.Summary).
func countsOnly(obj any) (any, error) {
	s, ok := obj.(*policyhubv1.PolicyReportSummary)
	if !ok {
		return obj, nil
	}
	kept := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{
		Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Generation: s.Generation,
	}, Status: s.Status}
	kept.Spec = s.Spec
	kept.Spec.Violations, kept.Spec.Exceptions = nil, nil
	kept.Spec.Policies = make([]policyhubv1.PolicySummary, len(s.Spec.Policies))
	for i, p := range s.Spec.Policies {
		p.LastBlocked, p.OldestResult, p.Title = nil, nil, ""
		kept.Spec.Policies[i] = p
	}
	return kept, nil
}
