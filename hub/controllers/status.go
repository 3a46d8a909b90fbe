package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/work"
)

// statusHalf runs a declaration's flow back from its clusters: the workers' outcomes (sent) and
// the agents' summaries → each cluster's state (its ClusterStatusSlices), the rollout's next
// step, the bounded status, Events. It renders nothing: what each cluster was asked for is the
// dispatch half's. Right after a change it waits a little for the clusters' results, so the
// status is written once for all; the workers' results wake it as they come.
func (e Engine) statusHalf(ctx context.Context, key types.NamespacedName, d, orig Declaration, sent dispatched, before []policyhubv1.ClusterStatus, have []policyhubv1.ClusterStatusSlice) (ctrl.Result, error) {
	obj := d.Object()
	st := d.CommonStatus()
	now := time.Now()
	wantedAt, answeredAt := e.room.since(key, sent.token, sent.pending < len(sent.kept), now)
	if wait := statusWait(now, wantedAt, answeredAt, sent.pending, e.coalesce, e.quiet); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	e.room.fresh(key, sent.kept)
	sh := e.shareOf(d)
	others := sh.others(before)
	clusters := withOthers(sh.answered(clusterStatuses(before, sent.kept, sent.Targets.Revisions, metav1.NewTime(now)), sent.kept, obj.GetGeneration()), others)
	owned := ownedPolicies(sent.Targets.Objects)
	read := readSummaries(ctx, e.reader, e.summaryMetas, clusters, sh)
	read.Heard = e.heard
	clusters = d.SetResults(clusters, read, owned, now)
	clusters, recheck := gateReports(sent.Rollout, sent.kept, clusters, read, owned, now)
	if !sh.writes {
		// Another replica writes the declaration's status: this one keeps its clusters' entries.
		if err := e.writeSlices(ctx, d, clusters, have); err != nil {
			return sliceWriteFailed(err)
		}
		emitSyncEvents(e.recorder, obj, before, sent.kept)
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	// The writer's view: another replica's state of an older generation is not an answer yet.
	view, theirs := sh.view(clusters, sent.Targets, obj.GetGeneration())
	outcomes := append(append([]Outcome(nil), sent.kept...), theirs...)
	failing, pending := sent.failing, sent.pending
	for _, o := range theirs {
		switch {
		case o.Pending:
			pending++
		case retrying(o.Result.Phase, o.Result.Message):
			failing = true
		}
	}
	*st.Summary = summarize(view)
	prog := d.Progress(sent.Rendering, outcomes, clusters, now)
	*st.ObservedGeneration = obj.GetGeneration()
	var reconciling *metav1.Condition
	switch {
	case failing:
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "RetryingClusters", Message: "some clusters failed or were locked; their workers retry with backoff"}
	case pending > 0:
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Progressing", Message: fmt.Sprintf("waiting for %d clusters", pending)}
	}
	ready := readyCondition(view, sent.Targets.Unknown, sent.Targets.MissingPlacement, obj.GetGeneration())
	var refused *metav1.Condition
	if prog.Holding != "" && ready.Status == metav1.ConditionTrue {
		msg := policyhubv1.TruncateMessage(prog.Holding, 1024)
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, prog.Reason, msg
		switch {
		case prog.Stalled:
			refused = &metav1.Condition{Status: metav1.ConditionTrue, Reason: prog.Reason, Message: msg}
		case reconciling == nil:
			reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: prog.Reason, Message: msg}
		}
	}
	stalled := notGranted(&ready, obj.GetNamespace(), sent.Targets.NotGranted)
	if stalled == nil {
		stalled = refused
	}
	if stalled == nil {
		stalled = overBudget(view)
	}
	setConditions(st.Conditions, ready, reconciling, stalled)
	if err := e.writeSlices(ctx, d, clusters, have); err != nil {
		return sliceWriteFailed(err)
	}
	if err := e.patchStatus(ctx, orig, d); err != nil {
		return ctrl.Result{}, err
	}
	if was := apimeta.FindStatusCondition(*orig.CommonStatus().Conditions, policyhubv1.ConditionReady); (ready.Reason == ReasonPlacementNotFound || ready.Reason == ReasonNotGranted) &&
		(was == nil || was.Reason != ready.Reason || was.Message != ready.Message) {
		e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ready.Reason, "Place", "%s", ready.Message)
	}
	emitSyncEvents(e.recorder, obj, before, sent.kept)
	wake := d.AfterStatus(ctx)
	if prog.Holding != "" {
		wake = MinPositive(wake, recheck) // a wave waits on reports not fresh yet
	}
	return ctrl.Result{RequeueAfter: MinPositive(wake, prog.Wake)}, nil
}

// Outcome is what one reconcile learnt about one cluster.
type Outcome struct {
	Cluster string
	Result  *work.DeclarationResult
	// Wrote is true when the sync changed something in the cluster (and was not announced yet).
	Wrote bool
	// WroteAt is when the worker last wrote the wanted state (zero: not since it started).
	WroteAt time.Time
	// Pending is true while the cluster's worker has no result for the wanted state.
	Pending bool
	// Seq orders the worker's results (see work.Result).
	Seq uint64
}

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

// SetResults sets each cluster's report results from its summary (when there is one): the
// results of the policies owned there, when the hub received them, and whether the hub judged its
// agent silent (stale).
func SetResults(clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus {
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

// summarize totals the clusters' state and names the clusters that need attention most (see
// attention): bounded at any fleet size.
func summarize(clusters []policyhubv1.ClusterStatus) policyhubv1.StatusSummary {
	var s policyhubv1.StatusSummary
	var needing []policyhubv1.ClusterStatus
	for _, c := range clusters {
		s.Clusters++
		switch {
		case c.Phase.Done():
			s.Synced++
		case c.Phase.Failing():
			s.Failed++
			if c.Phase == policyhubv1.ClusterPhaseNotEnforced {
				s.NotEnforced++
			}
		case c.Phase == policyhubv1.ClusterPhasePending:
			s.Pending++
		}
		if c.Stale {
			s.Stale++
		}
		if c.Phase.ProblemRank() > 0 || c.Stale {
			needing = append(needing, c)
		}
		if c.Results != nil {
			// Saturating: a cluster's largest counts must not wrap the totals negative, which
			// the CRD would refuse, and the whole status with them.
			aggregate.Add(&s.Results, *c.Results)
		}
	}
	s.Violations = aggregate.AddCount(s.Results.Fail, s.Results.Error)
	s.Attention, s.AttentionOmitted = attention(needing, policyhubv1.MaxAttention)
	return s
}

// attention keeps the n clusters that need attention most: the worst phase first (see
// ClusterPhase.ProblemRank), a silent agent before a heard one, then by name; and counts the rest.
func attention(needing []policyhubv1.ClusterStatus, n int) ([]policyhubv1.ClusterAttention, int32) {
	sort.Slice(needing, func(i, j int) bool {
		a, b := needing[i], needing[j]
		if ra, rb := a.Phase.ProblemRank(), b.Phase.ProblemRank(); ra != rb {
			return ra > rb
		}
		if a.Stale != b.Stale {
			return a.Stale
		}
		return a.Name < b.Name
	})
	var out []policyhubv1.ClusterAttention
	for _, c := range needing[:min(n, len(needing))] {
		out = append(out, policyhubv1.ClusterAttention{Name: c.Name, Phase: c.Phase, Message: policyhubv1.TruncateMessage(c.Message, 256), Stale: c.Stale})
	}
	return out, int32(len(needing) - len(out))
}

// readyCondition says, kstatus-style, whether every selected cluster holds the declaration.
// The reason is the worst cluster phase, or PlacementNotFound when the placement names an OCM
// Placement that does not exist (missingPlacement says which): a user must fix that first.
func readyCondition(clusters []policyhubv1.ClusterStatus, unknown []string, missingPlacement string, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: policyhubv1.ConditionReady, ObservedGeneration: generation}
	worst := ""
	var problems []string
	worstRank := 0
	dryRun := 0
	for _, c := range clusters {
		if r := c.Phase.ProblemRank(); r > 0 {
			problems = append(problems, fmt.Sprintf("%s: %s", c.Name, c.Phase))
			if r > worstRank {
				worstRank, worst = r, string(c.Phase)
			}
		}
		if c.Phase == policyhubv1.ClusterPhaseDryRun {
			dryRun++
		}
	}
	for _, name := range unknown {
		problems = append(problems, name+": unknown cluster")
	}
	if len(problems) > policyhubv1.MaxAttention {
		// The message names as many clusters as the attention list; a thousand names would only be cut.
		problems = append(problems[:policyhubv1.MaxAttention:policyhubv1.MaxAttention], fmt.Sprintf("and %d more", len(problems)-policyhubv1.MaxAttention))
	}
	switch {
	case missingPlacement != "":
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonPlacementNotFound
		cond.Message = missingPlacement
		if len(problems) > 0 {
			cond.Message += "; not synced in " + strings.Join(problems, ", ")
		}
		cond.Message = policyhubv1.TruncateMessage(cond.Message, 1024)
	case len(problems) > 0:
		cond.Status = metav1.ConditionFalse
		cond.Reason = worst
		if cond.Reason == "" {
			cond.Reason = "UnknownCluster"
		}
		cond.Message = policyhubv1.TruncateMessage("not synced in "+strings.Join(problems, ", "), 1024)
	case len(clusters) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "NoClusters", "the placement selects no cluster"
	case dryRun > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "DryRun"
		cond.Message = fmt.Sprintf("planned in %d clusters (dry-run), synced in %d", dryRun, len(clusters)-dryRun)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Synced"
		cond.Message = fmt.Sprintf("synced in %d clusters", len(clusters))
	}
	return cond
}

// ReasonNotGranted is the Ready and Stalled conditions' reason (and the Warning Event's) when an
// ApplicationPolicy asks for clusters or namespaces no grant gives its namespace.
const ReasonNotGranted = "NotGranted"

// maxNotGrantedListed bounds how many refused places a message names.
const maxNotGrantedListed = 10

// notGranted makes ready say which places (cluster/namespace) were refused for want of a grant,
// and returns the Stalled condition that goes with it (nil when nothing was refused). The granted
// places are synced all the same; the refused ones never are, until a hub admin grants them or
// the declaration stops asking.
func notGranted(ready *metav1.Condition, tenant string, refused []string) *metav1.Condition {
	if len(refused) == 0 {
		return nil
	}
	listed := refused
	more := ""
	if len(listed) > maxNotGrantedListed {
		listed, more = listed[:maxNotGrantedListed], fmt.Sprintf(" and %d more", len(refused)-maxNotGrantedListed)
	}
	msg := fmt.Sprintf("not granted to namespace %s, so never synced there: %s%s (%s)", tenant, strings.Join(listed, ", "), more, grantHint(refused))
	stalled := &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonNotGranted, Message: policyhubv1.TruncateMessage(msg, 1024)}
	if ready.Status == metav1.ConditionFalse && ready.Message != "" {
		msg += "; " + ready.Message
	}
	ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonNotGranted, policyhubv1.TruncateMessage(msg, 1024)
	return stalled
}

// grantHint says how a refused place is granted, or that it never is: the hub's sync Lease
// namespace is no tenant's in any cluster (placement.Reach).
func grantHint(refused []string) string {
	hint := "a hub admin grants clusters and namespaces with a TenantGrant, or an OCM ManagedClusterSetBinding"
	if slices.ContainsFunc(refused, func(place string) bool { return strings.HasSuffix(place, "/"+policyhubv1.SyncLeaseNamespace) }) {
		hint = "namespace " + policyhubv1.SyncLeaseNamespace + " holds the hub's sync Lease in every cluster and is never granted; " + hint
	}
	return hint
}

// ReasonOverBudget is the Stalled condition's reason when clusters refuse the declaration for its
// tenant's budget (its newest declarations past the budget wait there, see work.OverBudget):
// only a change of the tenant's declarations, or of the budget, ends it.
const ReasonOverBudget = "OverBudget"

// overBudget returns the Stalled condition of the clusters that refuse the declaration for its
// tenant's budget, with the first one's refusal (nil when none does).
func overBudget(clusters []policyhubv1.ClusterStatus) *metav1.Condition {
	first, refusing := "", 0
	for _, c := range clusters {
		if work.OverBudget(c.Phase == policyhubv1.ClusterPhaseFailed, c.Message) {
			if refusing == 0 {
				first = c.Message
			}
			refusing++
		}
	}
	if refusing == 0 {
		return nil
	}
	if refusing > 1 {
		first = fmt.Sprintf("refused in %d clusters; %s", refusing, first)
	}
	return &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonOverBudget, Message: policyhubv1.TruncateMessage(first, 1024)}
}

// ReasonPlacementNotFound is the Ready condition's reason (and the Warning Event's) when a
// placementRef names an OCM Placement that does not exist.
const ReasonPlacementNotFound = "PlacementNotFound"

// setConditions sets Ready, Reconciling and Stalled consistently.
func setConditions(conds *[]metav1.Condition, ready metav1.Condition, reconciling, stalled *metav1.Condition) {
	apimeta.SetStatusCondition(conds, ready)
	for _, c := range []struct {
		kind string
		cond *metav1.Condition
	}{{policyhubv1.ConditionReconciling, reconciling}, {policyhubv1.ConditionStalled, stalled}} {
		if c.cond == nil {
			apimeta.RemoveStatusCondition(conds, c.kind)
			continue
		}
		c.cond.Type = c.kind
		c.cond.ObservedGeneration = ready.ObservedGeneration
		apimeta.SetStatusCondition(conds, *c.cond)
	}
}

// Bounds of an ApplicationPolicy's status (the CRD's MaxItems).
const (
	maxApplicationPolicyResults = 100
	maxTopViolations            = 20
)

// applicationResults is an application's own results in each cluster, from the agents'
// per-application breakdown: per generated policy (counts, and the policy's refused admissions,
// which are all the application's, since a generated policy matches only its resources), and the
// top violations of those policies. In each cluster this replica works (read) they are set in
// its state, with its results set to the application's totals; the status's are merged from
// every cluster's state (another replica's as it wrote them). An entry a summary lists twice
// counts once (its first), and no count is negative.
func applicationResults(app string, clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) ([]policyhubv1.ApplicationPolicyResult, []policyhubv1.Violation) {
	var results []policyhubv1.ApplicationPolicyResult
	var violations [][]policyhubv1.Violation // by cluster, in the clusters' order
	for i := range clusters {
		c := &clusters[i]
		if !read.Unread[c.Name] {
			c.ApplicationResults, c.Violations = nil, nil
			if s, ok := read.Summaries[c.Name]; ok {
				c.ApplicationResults, c.Violations = clusterApplicationResults(app, c, s, owned[c.Name], now)
			}
		}
		results = append(results, c.ApplicationResults...)
		violations = append(violations, c.Violations)
	}
	sort.SliceStable(results, func(i, j int) bool {
		if results[i].Cluster != results[j].Cluster {
			return results[i].Cluster < results[j].Cluster
		}
		return results[i].Policy < results[j].Policy
	})
	if len(results) > maxApplicationPolicyResults {
		results = results[:maxApplicationPolicyResults]
	}
	return results, topViolations(violations, maxTopViolations, now)
}

// clusterApplicationResults are the application's results in the cluster c from its summary s,
// per policy of those owned there (sorted, at most maxApplicationPolicyResults), and its top
// violations there (at most maxTopViolations); c's results are set to their totals.
func clusterApplicationResults(app string, c *policyhubv1.ClusterStatus, s *policyhubv1.PolicyReportSummary, owned []aggregate.Policy, now time.Time) ([]policyhubv1.ApplicationPolicyResult, []policyhubv1.Violation) {
	total := policyhubv1.ResultCounts{}
	var blocked int64
	var results []policyhubv1.ApplicationPolicyResult
	refs := map[string]bool{}
	for _, p := range owned {
		ref := policyhubv1.PolicyRef(p.Namespace, p.Name)
		refs[ref] = true
		r := applicationPolicyResult(app, c.Name, p, &s.Spec)
		aggregate.Add(&total, r.Results)
		blocked = aggregate.AddCount(blocked, r.Blocked)
		results = append(results, r)
	}
	var own []policyhubv1.Violation
	for _, v := range s.Spec.Violations {
		if refs[v.Policy] {
			v.Cluster = c.Name
			own = append(own, v)
		}
	}
	c.Results, c.Blocked = &total, blocked
	sort.SliceStable(results, func(i, j int) bool { return results[i].Policy < results[j].Policy })
	return results[:min(len(results), maxApplicationPolicyResults)], topViolations([][]policyhubv1.Violation{own}, maxTopViolations, now)
}

// applicationPolicyResult is one generated policy's results for the application in a cluster.
func applicationPolicyResult(app, cluster string, p aggregate.Policy, s *policyhubv1.PolicyReportSummarySpec) policyhubv1.ApplicationPolicyResult {
	r := policyhubv1.ApplicationPolicyResult{Cluster: cluster, Policy: p.Name}
	ref := policyhubv1.PolicyRef(p.Namespace, p.Name)
	var seenApps []string // namespaces of the application's entries for the policy: each counts once
	for i := range s.Applications {
		a := &s.Applications[i]
		if a.Name != app || a.Policy != ref || slices.Contains(seenApps, a.Namespace) {
			continue
		}
		seenApps = append(seenApps, a.Namespace)
		aggregate.Add(&r.Results, a.Results)
	}
	var seenPolicies []policyhubv1.PolicySummaryKey
	for i := range s.Policies {
		ps := &s.Policies[i]
		if ps.Name != p.Name || ps.Namespace != p.Namespace || (ps.Kind != "" && ps.Kind != p.Kind) || slices.Contains(seenPolicies, ps.Key()) {
			continue
		}
		seenPolicies = append(seenPolicies, ps.Key())
		r.Blocked = aggregate.AddCount(r.Blocked, ps.Blocked)
		if ps.LastBlocked != nil {
			r.LastBlocked = ps.LastBlocked.DeepCopy()
		}
	}
	return r
}

// topViolations keeps at most n of the clusters' violations (given by cluster, in a stable
// order), fairly: each cluster's own are ranked most severe and newest first, and the clusters
// take turns, so that no cluster can push the others out, however many and however severe its
// own violations say they are. What is kept is then shown most severe and newest first (turn
// order among equals). A time later than now counts as now: a cluster's clock, or agent, must not
// make its violations the newest.
func topViolations(byCluster [][]policyhubv1.Violation, n int, now time.Time) []policyhubv1.Violation {
	less := func(a, b *policyhubv1.Violation) bool {
		if ra, rb := policyhubv1.SeverityRank(a.Severity), policyhubv1.SeverityRank(b.Severity); ra != rb {
			return ra < rb
		}
		ta, tb := rankTime(a.Timestamp, now), rankTime(b.Timestamp, now)
		return ta.After(tb)
	}
	ranked := make([][]policyhubv1.Violation, len(byCluster))
	for i, vs := range byCluster {
		vs = slices.Clone(vs)
		sort.SliceStable(vs, func(a, b int) bool { return less(&vs[a], &vs[b]) })
		ranked[i] = vs[:min(len(vs), n)]
	}
	var out []policyhubv1.Violation
	for turn := 0; len(out) < n; turn++ {
		took := false
		for _, vs := range ranked {
			if turn < len(vs) && len(out) < n {
				out = append(out, vs[turn])
				took = true
			}
		}
		if !took {
			break
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return less(&out[a], &out[b]) })
	return out
}

// rankTime is a violation's time for ranking: never later than now, and the zero time when it
// has none (oldest).
func rankTime(t *metav1.Time, now time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	if t.After(now) {
		return now
	}
	return t.Time
}
