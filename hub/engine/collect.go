package engine

import (
	"context"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
)

// clusterStatuses merges this reconcile's outcomes into the previous per-cluster statuses.
// lastSyncTime moves only when the cluster's phase, message or counts changed or the sync wrote,
// so a resync that changed nothing leaves the status as it was (and nothing is persisted). A
// cluster synced in full holds the revision it was given (revisions, for kinds with versions);
// one that is not keeps the revision it held.
func clusterStatuses(old []policyhubv1.ClusterStatus, outcomes []Outcome, revisions map[string]string, now metav1.Time) []policyhubv1.ClusterStatus {
	previous := map[string]policyhubv1.ClusterStatus{}
	for _, s := range old {
		previous[s.Name] = s
	}
	out := make([]policyhubv1.ClusterStatus, 0, len(outcomes))
	for _, o := range outcomes {
		prev, had := previous[o.Cluster]
		s := prev
		s.Name = o.Cluster
		s.Phase = o.Result.Phase
		s.Message = o.Result.Message
		if s.Phase == policyhubv1.ClusterPhaseSynced {
			// The counts are in actions: a message per synced cluster would only repeat them,
			// and at a thousand clusters it is a fifth of the status.
			s.Message = ""
		}
		s.Actions = o.Result.Actions
		s.InForce = o.Result.InForce
		s.Plan = o.Result.Plan
		s.PlanTruncated = o.Result.PlanTruncated
		if revision := revisions[o.Cluster]; revision != "" && !o.Pending && s.Phase == policyhubv1.ClusterPhaseSynced {
			s.Revision = revision
		}
		if !had || o.Wrote || prev.Phase != s.Phase || prev.Message != s.Message || prev.Actions != s.Actions || s.LastSyncTime == nil {
			t := now
			s.LastSyncTime = &t
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetClusterResults sets each cluster's report results from its summary (when there is one): the
// results of the policies owned there, when the hub received them, and whether the hub judged its
// agent silent (stale).
func SetClusterResults(clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus {
	for i := range clusters {
		c := &clusters[i]
		if read.Unread[c.Name] {
			continue // the summary could not be read just now: keep what is known
		}
		summary, ok := read.Summaries[c.Name]
		if !ok {
			c.Results, c.Blocked, c.BlockedIncludesDryRuns, c.ReportTime, c.Stale = nil, 0, false, nil, false
			continue
		}
		res := aggregate.ForPolicies(summary, owned[c.Name], now)
		c.Results, c.Blocked, c.ReportTime, c.Stale = &res.Counts, res.Blocked, res.ReportTime, res.Stale
		c.BlockedIncludesDryRuns = res.BlockedIncludesDryRuns
	}
	return clusters
}

// readSummaries reads the accepted summaries of the clusters this replica works (sh): those
// other replicas work are unread here, their state kept as their owners wrote it (with sharing
// on, this replica's cache holds only its own clusters' summaries). They are the cache's own
// objects (one list, no copies: a reconcile at a thousand clusters would otherwise copy a
// thousand summaries), so they must not be changed.
func readSummaries(ctx context.Context, reader, metas client.Reader, clusters []policyhubv1.ClusterStatus, sh share) SummaryRead {
	summaries, unread := map[string]*policyhubv1.PolicyReportSummary{}, map[string]bool{}
	wanted := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		if sh.owns(c.Name) {
			wanted[c.Name] = true
		} else {
			unread[c.Name] = true
		}
	}
	list := &policyhubv1.PolicyReportSummaryList{}
	if err := reader.List(ctx, list, ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "read the clusters' summaries; their results are kept as they were")
		for _, c := range clusters {
			unread[c.Name] = true
		}
		return SummaryRead{Summaries: summaries, Unread: unread}
	}
	cached := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		cached[s.Namespace] = true
		if wanted[s.Namespace] && s.Accepted() == nil && !RefusedInvalid(s) {
			summaries[s.Namespace] = s
		}
	}
	if metas != nil {
		// A cluster this replica took over has a summary its cache holds only once it is
		// labelled as worked by this replica (SummaryLabeler): until then it is unread, not gone.
		for name := range wanted {
			if !cached[name] && summaryExists(ctx, metas, name) {
				unread[name] = true
			}
		}
	}
	return SummaryRead{Summaries: summaries, Unread: unread}
}

// summaryExists says whether the cluster has a summary, by every summary's metadata (an error:
// as if it had, so that what is known is kept).
func summaryExists(ctx context.Context, metas client.Reader, cluster string) bool {
	err := metas.Get(ctx, client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, SummaryMeta())
	return !apierrors.IsNotFound(err)
}

// ownedPolicies are, per cluster, the policy objects a declaration owns there: the ones its
// results are read for.
func ownedPolicies(objects map[string][]*unstructured.Unstructured) map[string][]aggregate.Policy {
	owned := map[string][]aggregate.Policy{}
	// Clusters share their rendered objects (a set's hundred members in a thousand clusters): a
	// shared list is named once and its names shared too; they are only read.
	type list struct {
		array **unstructured.Unstructured
		n     int
	}
	shared := map[list][]aggregate.Policy{}
	for cluster, objs := range objects {
		if len(objs) == 0 {
			continue
		}
		key := list{&objs[0], len(objs)}
		if policies, ok := shared[key]; ok {
			owned[cluster] = policies
			continue
		}
		policies := make([]aggregate.Policy, 0, len(objs))
		for _, obj := range objs {
			if policyhubv1.IsShadow(obj.GetLabels()) {
				continue // a preview's: its results are never the declaration's (setPreviews)
			}
			policies = append(policies, aggregate.Policy{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
		shared[key], owned[cluster] = policies, policies
	}
	return owned
}

// SummaryMeta is a PolicyReportSummary's metadata.
func SummaryMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind("PolicyReportSummary"))
	return m
}

// ReasonInvalid is a summary's Ready reason when it holds what the CRD refuses: an older CRD
// let it through. It is not aggregated.
const ReasonInvalid = "Invalid"

// RefusedInvalid says whether the summary controller refused the summary's current generation
// as Invalid (see judgeSummary). Until it has looked, the summary is read: aggregate clamps and
// dedupes whatever it holds, so it can change nothing beyond its own cluster's results.
func RefusedInvalid(s *policyhubv1.PolicyReportSummary) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady)
	return c != nil && c.Reason == ReasonInvalid && c.ObservedGeneration == s.Generation
}

// gateReports judges, in the state of each cluster this replica works that is rolling out plan's
// version (nil: no rollout), whether its reports are of that version (ReportsFresh, see
// freshReport): the gates count only those. Another replica's clusters keep their owner's
// judgement (read.unread). recheck is how soon a cluster not fresh yet, in a wave not done, may
// be proven fresh by its agent heard again (zero: none): a renewal wakes no declaration.
func gateReports(plan *rollout.Plan, own []Outcome, clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) ([]policyhubv1.ClusterStatus, time.Duration) {
	if plan == nil {
		for i := range clusters {
			if !read.Unread[clusters[i].Name] {
				clusters[i].ReportsFresh, clusters[i].ReportsFreshFor = nil, nil
			}
		}
		return clusters, 0
	}
	done := map[string]bool{}
	syncedAt := map[string]time.Time{} // by cluster: when its wave was seen synced
	for _, s := range plan.States {
		done[s.Name] = s.Phase == rollout.Done
		if s.SyncedAt == nil {
			continue
		}
		for _, w := range plan.Waves {
			if w.Name == s.Name {
				for _, c := range w.Clusters {
					syncedAt[c] = *s.SyncedAt
				}
			}
		}
	}
	waveOf := map[string]string{}
	for _, w := range plan.Waves {
		for _, c := range w.Clusters {
			waveOf[c] = w.Name
		}
	}
	outcomes := make(map[string]Outcome, len(own))
	for _, o := range own {
		outcomes[o.Cluster] = o
	}
	var recheck time.Time
	for i := range clusters {
		c := &clusters[i]
		o, mine := outcomes[c.Name]
		if read.Unread[c.Name] || !mine {
			continue
		}
		judgedFor := c.ReportsFreshFor
		if c.ReportsFresh == nil || !*c.ReportsFresh {
			judgedFor = nil
		}
		c.ReportsFresh, c.ReportsFreshFor = nil, nil
		if _, rolling := plan.Modes[c.Name]; !rolling {
			continue // held at the stable version: not judged
		}
		// The version arrived when the worker wrote it. A worker that did not (it found it there
		// when the hub started, or another replica wrote it) cannot say when it arrived: its
		// summary counts from the moment the wave was seen synced, on whatever results it holds
		// (Kyverno evaluated them when the version arrived).
		arrived, known := o.WroteAt, !o.WroteAt.IsZero()
		if !known {
			arrived = syncedAt[c.Name]
		}
		fresh := false
		if s, ok := read.Summaries[c.Name]; ok && !arrived.IsZero() {
			res := aggregate.ForPolicies(s, owned[c.Name], now)
			heard := read.LastHeard(s, now)
			// A summary pushed after the version's reports were judged fresh speaks of the same
			// version or a later state of it; until the hub observes when it came, the judgement
			// made for this arrival stands (the summary controller observes it within moments,
			// and this is judged again then).
			if res.Observed.IsZero() && judgedFor != nil && judgedFor.Time.Equal(arrivalMicro(arrived)) {
				fresh = true
			} else if fresh = freshReport(res, heard, arrived, known, quietProof(s)); !fresh && !done[waveOf[c.Name]] {
				// Look again when the agent's next renewal is due, or when one would be late
				// enough to count.
				at := arrived.Add(quietProof(s))
				if next := heard.Add(aggregate.Heartbeat(s)); next.After(at) {
					at = next
				}
				if !at.After(now) {
					at = now.Add(aggregate.Heartbeat(s)) // the agent is late: no sooner than its next renewal
				}
				if recheck.IsZero() || at.Before(recheck) {
					recheck = at
				}
			}
		}
		c.ReportsFresh = &fresh
		if fresh {
			c.ReportsFreshFor = &metav1.MicroTime{Time: arrivalMicro(arrived)}
		}
	}
	if recheck.IsZero() {
		return clusters, 0
	}
	return clusters, max(recheck.Sub(now)+time.Second, time.Millisecond)
}

// arrivalMicro is an arrival as the status stores it (RFC 3339 with microseconds, UTC), so a
// judgement read back from a slice compares equal to the arrival it was made for.
func arrivalMicro(arrived time.Time) time.Time {
	return arrived.Truncate(time.Microsecond).UTC()
}

// reportGrace is how long after a policy arrived in a cluster its agent's summary may still
// list no result of it for the rollout to take that as "nothing to report": Kyverno evaluates
// every resource again when a policy changes and merges the results into reports within
// seconds; a policy that matches no resource never has any.
const reportGrace = 30 * time.Second

// quietProof is how long after a version arrived the hub must have heard its cluster's agent
// (its Lease renewed) for an unchanged summary to count as the agent's report of that version:
// Kyverno's grace, plus the time an agent may hold a change before pushing it (its push
// interval: 10s by default, longer when the hub paces a big fleet, and a paced agent may hold
// even a new failure that long once its reserve of urgent pushes is spent), so a renewal cannot
// overtake a push of new results.
func quietProof(s *policyhubv1.PolicyReportSummary) time.Duration {
	return reportGrace + max(15*time.Second, aggregate.PushInterval(s)+5*time.Second)
}

// freshReport tells whether a summary's results of a declaration's policies are of the version
// that arrived at arrived (by the hub's clock: when the worker wrote it, or when the wave was
// seen synced). Everything is compared by the hub's clock, never the cluster's, which may run
// hours ahead or behind:
//   - the hub saw the summary after the arrival (status.observedTime), or heard its agent
//     (lastHeard: its Lease renewed) quietProof after it: an agent alive that long after the
//     arrival with nothing new to push has nothing new to say of that version;
//   - when the arrival is known (written), every result was made after it: Kyverno evaluates
//     every resource again when a policy changes. Kyverno's times are the cluster's clock; they
//     are translated by the offset the hub measured when it saw the summary (generatedAt less
//     observedTime), and, being whole seconds, count from a second before the arrival;
//   - a policy without results counts only once Kyverno has had reportGrace to report it (the
//     summary seen that long after the arrival, or the agent heard quietProof after it).
//
// What remains is the summary's way to the hub: the offset is measured when the hub saw the
// summary, moments after the agent stamped generatedAt (the push's latency, and the hub's queue
// of summaries), so translated result times read that much later than they were, and a summary
// the agent built just before the arrival but the hub saw just after counts as after it. Both
// are the push's latency: sub-second normally, seconds when the hub is busy.
func freshReport(res aggregate.Results, lastHeard, arrived time.Time, written bool, quietProof time.Duration) bool {
	if res.Observed.IsZero() {
		return false
	}
	quiet := !lastHeard.Before(arrived.Add(quietProof))
	if !res.Observed.After(arrived) && !quiet {
		return false
	}
	if written && !res.OldestResult.IsZero() && !res.OldestResult.After(arrived.Add(-time.Second)) {
		return false
	}
	return res.Unlisted == 0 || !res.Observed.Before(arrived.Add(reportGrace)) || quiet
}

// setPreviews sets each cluster's preview (spec.preview) from its summary: for the shadows the
// declaration ships there at their rendered content; none where it ships none, or only plans
// (dry-run: a shadow that is never written never reports). A cluster whose summary could not
// be read keeps what is known. A cluster counts as reported only once Kyverno has had time to
// scan every resource for the shadow (settled): an agent lists a new shadow at once, with the
// results Kyverno has made so far. recheck is how soon a cluster not settled yet may be (zero:
// none).
func setPreviews(clusters []policyhubv1.ClusterStatus, read SummaryRead, t *render.Targets, own []Outcome, now time.Time) ([]policyhubv1.ClusterStatus, time.Duration) {
	wrote := make(map[string]time.Time, len(own))
	for _, o := range own {
		wrote[o.Cluster] = o.WroteAt
	}
	var recheck time.Time
	for i := range clusters {
		c := &clusters[i]
		if read.Unread[c.Name] {
			continue
		}
		var shadows []aggregate.Shadow
		if !t.DryRun[c.Name] {
			for _, obj := range t.Objects[c.Name] {
				if policyhubv1.IsShadow(obj.GetLabels()) {
					shadows = append(shadows, aggregate.Shadow{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
						ContentHash: obj.GetAnnotations()[policyhubv1.AnnotationContentHash]})
				}
			}
		}
		if len(shadows) == 0 {
			c.Preview = nil
			continue
		}
		s := read.Summaries[c.Name]
		p := aggregate.ForShadows(s, shadows)
		// The shadows arrived when the worker wrote them; a worker that did not (the hub
		// restarted, another replica wrote) counts from the cluster's last sync.
		arrived := wrote[c.Name]
		if arrived.IsZero() && c.LastSyncTime != nil {
			arrived = c.LastSyncTime.Time
		}
		if p.Reported {
			if at, ok := settledAt(s, read, arrived, now); !ok {
				p.Reported = false
				if recheck.IsZero() || at.Before(recheck) {
					recheck = at
				}
			}
		}
		c.Preview = &p
	}
	if recheck.IsZero() {
		return clusters, 0
	}
	return clusters, max(recheck.Sub(now)+time.Second, time.Millisecond)
}

// settledAt says whether the summary s speaks of shadows that arrived at arrived after Kyverno
// has had reportGrace to scan every resource for them: the hub saw it that long after, or heard
// the agent (its Lease) quietProof after, with nothing new to push (see freshReport). When not,
// at is when it may be.
func settledAt(s *policyhubv1.PolicyReportSummary, read SummaryRead, arrived, now time.Time) (at time.Time, ok bool) {
	if arrived.IsZero() {
		return now.Add(quietProof(s)), false
	}
	observed, _ := aggregate.ObservedAt(s, now)
	if !observed.Before(arrived.Add(reportGrace)) || !read.LastHeard(s, now).Before(arrived.Add(quietProof(s))) {
		return time.Time{}, true
	}
	at = arrived.Add(quietProof(s))
	if next := read.LastHeard(s, now).Add(aggregate.Heartbeat(s)); next.After(at) {
		at = next
	}
	if !at.After(now) {
		at = now.Add(aggregate.Heartbeat(s))
	}
	return at, false
}
