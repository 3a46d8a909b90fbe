package engine

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/work"
)

// Declaration is one declaration of a kind the hub syncs into clusters (FleetPolicy, PolicySet,
// ApplicationPolicy, FleetPolicyException): the engine runs the same lifecycle for every kind, and
// each kind says here what differs.
type Declaration interface {
	// Object is the API object, for the clients and the Event recorder; its status holds what
	// every kind's does (observed generation, conditions, the clusters' summary), which the
	// engine writes.
	Object() policyhubv1.Declaration
	// Kind is the declaration's kind (FleetPolicy, ApplicationPolicy, ...).
	Kind() string
	// Source names the declaration on the objects it ships, as hub hubID's.
	Source(hubID string) string
	// Suspended and Prune are its spec's suspend and prune.
	Suspended() bool
	Prune() bool
	// Render places the declaration and renders what each placed cluster gets (the engine
	// fills in the rendering's input, epoch and token).
	Render(ctx context.Context) (*Rendering, error)
	// RenderInput is what render reads from the declaration besides its spec and annotations
	// (e.g. a FleetPolicy's rollout state): a rendering is reused while it is the same.
	RenderInput() string
	// SetResults sets the agents' results in the state of the clusters this replica works, from
	// their accepted summaries, and in the status from every cluster's state (read.unread: kept
	// as it was, e.g. as another replica wrote it).
	SetResults(clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus
	// Progress moves what the declaration rolls out (made by the rendering r), from the
	// clusters' outcomes and state (their results, and whether their reports are fresh).
	Progress(r *Rendering, outcomes []Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) Progress
	// AfterStatus runs once the status is written (e.g. mirroring it elsewhere) and may ask to
	// be woken again.
	AfterStatus(ctx context.Context) time.Duration
	// Copy is a deep copy, for the status patch's base.
	Copy() Declaration
}

// ChurnRemover is a Declaration whose status holds results besides its summary's (an
// ApplicationPolicy's, per policy): RemoveChurn takes their churn (policyhubv1.ResultCounts.
// WithoutChurn) out of obj, a copy of its object, as the engine does of the summary's.
type ChurnRemover interface {
	RemoveChurn(obj policyhubv1.Declaration)
}

// Progress is what a declaration's rollout says after a step.
type Progress struct {
	// Holding says why the declaration is not Ready though its clusters hold what they should
	// now ("" when nothing holds it); Reason is the condition reason for it.
	Holding, Reason string
	// Stalled says that only a change of the declaration can end the holding: Stalled, rather
	// than Reconciling.
	Stalled bool
	// Wake is when to reconcile again without an event (zero: no need).
	Wake time.Duration
}

// DeclarationOptions are what the reconcilers of every declaration kind need: how they reach the
// hub and the clusters, and how often and how widely they sync.
type DeclarationOptions struct {
	// Client reads and writes the hub (the declarations and their status).
	Client client.Client
	// Reader reads the inventory (gateway Secrets' metadata, OCM objects) and the agents'
	// summaries; the manager's cached client serves them from watches.
	Reader client.Reader
	// SecretNamespace is the gateway's credential-secret namespace.
	SecretNamespace string
	HubID           string
	// Workers own the clusters: a reconcile hands them what the declaration wants and reads
	// their latest results, never waiting for a cluster.
	Workers *work.Workers
	// Results wakes the declarations whose results the workers published.
	Results  *ResultEvents
	Recorder events.EventRecorder
	// StatusCoalesce is how long a declaration's status waits, after a change, for its clusters'
	// results from the first cluster's answer, so that it is written once for all rather than
	// once per cluster; a cluster slower than that is shown Pending meanwhile. Before any cluster
	// has answered it waits up to 5 times as long. Zero means 2s.
	StatusCoalesce time.Duration
	// MaxConcurrentReconciles bounds the declarations of the kind reconciled at once.
	MaxConcurrentReconciles int
	// OCMPlacements is true when the hub serves OCM's Placement API: declarations with a
	// placementRef then follow its Placement and PlacementDecisions as they change.
	OCMPlacements bool
	// Heard is when each cluster's agent last renewed its Lease, by the hub's clock: an agent
	// heard well after a version arrived, with nothing new to say, has reported it (freshReport).
	// Nil: only summaries count.
	Heard *heartbeat.Heard
	// Namespace is the hub's own: cluster-scoped declarations' ClusterStatusSlices live there (a
	// namespaced one's live in its namespace).
	Namespace string
	// ClustersPerSlice is how many clusters one ClusterStatusSlice holds; zero means
	// policyhubv1.MaxClustersPerSlice.
	ClustersPerSlice int
	// Renders counts the declarations rendered (nil: not counted).
	Renders *metrics.Renders
	// Shard is this replica's share of the fleet when the hub's replicas share it (nil: this
	// replica works every cluster and writes every status).
	Shard *shard.Sharder
	// SummaryMetas reads every summary's metadata when the replicas share the fleet (see
	// NewSummaryMetas): Reader holds only the summaries of this replica's clusters.
	SummaryMetas client.Reader
}

// statusQuiet is how many StatusCoalesce a status waits for its first cluster's answer.
const statusQuiet = 5

// Engine returns the Engine that reconciles declarations with these options; room is the
// reconciler's memory of its declarations between reconciles.
func (o *DeclarationOptions) Engine(room *Room) Engine {
	coalesce := o.StatusCoalesce
	if coalesce <= 0 {
		coalesce = 2 * time.Second
	}
	return Engine{
		client: o.Client, reader: o.Reader, recorder: o.Recorder, hubID: o.HubID, coalesce: coalesce, quiet: statusQuiet * coalesce, room: room, renders: o.Renders,
		secretNamespace: o.SecretNamespace, heard: o.Heard, namespace: o.Namespace, sliceSize: o.ClustersPerSlice, shard: o.Shard,
		summaryMetas: o.SummaryMetas,
		dispatch:     dispatcher{workers: o.Workers},
	}
}

// ReadOnlyList lists the cache's own objects instead of deep copies, for reads that only look
// (event maps, lookups): every summary or inventory event would otherwise copy every
// declaration. Objects listed with it must never be changed.
const ReadOnlyList = client.UnsafeDisableDeepCopyOption(true)

// Engine runs a declaration's lifecycle: finalizer and suspend here; then the flow in two halves,
// the dispatch half towards the clusters (placement and rendering, sync of every selected
// cluster, pruning those no longer selected: dispatchHalf) and the status half back from them
// (the workers' outcomes and the agents' results → per-cluster state, status, Events:
// statusHalf), which meet in the results room.
type Engine struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	dispatch dispatcher
	hubID    string
	// secretNamespace holds cluster-gateway's credential Secrets: a cluster without one has left.
	secretNamespace string
	coalesce        time.Duration
	// quiet bounds how long a status waits for the first cluster to answer (see statusWait).
	quiet time.Duration
	room  *Room
	heard *heartbeat.Heard
	// renders counts the renderings the dispatch half makes (nil: not counted).
	renders *metrics.Renders
	// namespace holds cluster-scoped declarations' ClusterStatusSlices; sliceSize is the clusters per slice.
	namespace string
	sliceSize int
	// shard is this replica's share of the fleet (nil: all of it; see share).
	shard *shard.Sharder
	// summaryMetas reads every summary's metadata (nil with one replica).
	summaryMetas client.Reader
}

// dispatcher hands declarations' desired state to the per-cluster workers and reads back their
// latest results. It never waits for a cluster.
type dispatcher struct {
	workers *work.Workers
}

// SummaryRead is what a reconcile read of its clusters' summaries.
type SummaryRead struct {
	// Summaries are the accepted summaries, by cluster.
	Summaries map[string]*policyhubv1.PolicyReportSummary
	// Unread are the clusters whose summary could not be read (a transient error): their
	// results are kept as they were rather than dropped.
	Unread map[string]bool
	// Heard is when the clusters' agents last renewed their Leases (nil: not known).
	Heard *heartbeat.Heard
}

// LastHeard is when the hub last heard from the cluster's agent, by its clock: the summary s or,
// later, its Lease renewed.
func (r SummaryRead) LastHeard(s *policyhubv1.PolicyReportSummary, now time.Time) time.Time {
	return aggregate.LastHeard(s, r.Heard.At(s.Namespace), now)
}
