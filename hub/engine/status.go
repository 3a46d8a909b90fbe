package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/work"
)

// statusWait is how much longer a declaration's status waits for its clusters' results, so that
// it is written once for all of them rather than once per cluster; zero means write it now.
// With every cluster answered it waits no more. Otherwise it waits coalesce from the first
// answer: clusters fed the same burst of work answer close together, and a slow one is shown
// Pending after that. A status that could only say "every cluster Pending" tells nothing the
// stale observedGeneration does not (kstatus reads it as in progress), so it waits for the
// first answer, up to quiet. A dark cluster answers at once (Failed), so it holds nothing back.
func statusWait(now, wantedAt, answeredAt time.Time, pending int, coalesce, quiet time.Duration) time.Duration {
	if pending == 0 {
		return 0
	}
	due := wantedAt.Add(quiet)
	if !answeredAt.IsZero() {
		due = answeredAt.Add(coalesce)
	}
	return max(due.Sub(now), 0)
}

// statusHalf runs a declaration's flow back from its clusters: the workers' outcomes (sent) and
// the agents' summaries → each cluster's state (its ClusterStatusSlices), the rollout's next
// step, the bounded status, Events. It renders nothing: what each cluster was asked for is the
// dispatch half's. Right after a change it waits a little for the clusters' results, so the
// status is written once for all; the workers' results wake it as they come.
func (e Engine) statusHalf(ctx context.Context, key types.NamespacedName, d Declaration, status *statusPatch, sent dispatched, before []policyhubv1.ClusterStatus, have []policyhubv1.ClusterStatusSlice) (ctrl.Result, error) {
	obj := d.Object()
	st := d.Object().DeclarationStatus()
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
	clusters, previewRecheck := setPreviews(clusters, read, sent.Targets, sent.kept, now)
	clusters, recheck := gateReports(sent.Rollout, sent.kept, clusters, read, owned, now)
	recheck = MinPositive(recheck, previewRecheck)
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
	SetConditions(st.Conditions, ready, reconciling, stalled)
	if err := e.writeSlices(ctx, d, clusters, have); err != nil {
		return sliceWriteFailed(err)
	}
	status.write(func(ctx context.Context) ctrl.Result {
		if was := apimeta.FindStatusCondition(*status.orig.Object().DeclarationStatus().Conditions, policyhubv1.ConditionReady); (ready.Reason == ReasonPlacementNotFound || ready.Reason == ReasonNotGranted) &&
			(was == nil || was.Reason != ready.Reason || was.Message != ready.Message) {
			e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ready.Reason, "Place", "%s", ready.Message)
		}
		emitSyncEvents(e.recorder, obj, before, sent.kept)
		wake := d.AfterStatus(ctx)
		if prog.Holding != "" {
			wake = MinPositive(wake, recheck) // a wave waits on reports not fresh yet
		}
		wake = MinPositive(wake, previewRecheck) // a preview waits on clusters not settled yet
		return ctrl.Result{RequeueAfter: MinPositive(wake, prog.Wake)}
	})
	return ctrl.Result{}, nil
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

// SetConditions sets Ready, Reconciling and Stalled consistently.
func SetConditions(conds *[]metav1.Condition, ready metav1.Condition, reconciling, stalled *metav1.Condition) {
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

// statusPatch writes a declaration's status once per reconcile, as the reconcile ends, in the
// manner of fluxcd/pkg/runtime/patch's helper: the phases set the status on the declaration, the
// phase that decides it is to be written says so (write), and one patch is made, from the status
// as the reconcile found it. What follows a written status (Events, mirrors) runs after the write.
type statusPatch struct {
	client client.Client
	// orig is the declaration as the reconcile found it, d the one the phases change.
	orig, d Declaration
	due     bool
	then    func(context.Context) ctrl.Result
}

// newStatusPatch starts the status patch of d, as d is now.
func newStatusPatch(c client.Client, d Declaration) *statusPatch {
	return &statusPatch{client: c, orig: d.Copy(), d: d}
}

// write asks for the status to be written when the reconcile ends; then (nil: nothing) runs once
// it is, and says when to reconcile again.
func (p *statusPatch) write(then func(context.Context) ctrl.Result) {
	p.due, p.then = true, then
}

// finish ends a reconcile that returned result and err: unless it failed, the status is written
// when asked for (and changed, see patchStatus), and what follows it runs.
func (p *statusPatch) finish(ctx context.Context, result ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil || !p.due {
		return result, err
	}
	if err := patchStatus(ctx, p.client, p.orig, p.d); err != nil {
		return ctrl.Result{}, err
	}
	if p.then == nil {
		return result, nil
	}
	return p.then(ctx), nil
}

// patchStatus writes the status when it changed (a no-op resync writes nothing): see
// StatusChanged.
func patchStatus(ctx context.Context, c client.Client, orig, d Declaration) error {
	if !StatusChanged(orig, d) {
		return nil
	}
	if err := c.Status().Patch(ctx, d.Object(), client.MergeFrom(orig.Object())); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// StatusChanged says whether d's status is worth writing over orig's. A change of the pass, warn
// or skip counts alone is not (policyhubv1.ResultCounts.WithoutChurn): they move with every
// agent's summary, and are taken along when anything else changes.
func StatusChanged(orig, d Declaration) bool {
	return !equality.Semantic.DeepEqual(withoutChurn(orig), withoutChurn(d))
}

// withoutChurn is a copy of d's object without the counts that move with every summary.
func withoutChurn(d Declaration) policyhubv1.Declaration {
	obj, ok := d.Object().DeepCopyObject().(policyhubv1.Declaration)
	if !ok {
		return d.Object() // never: a declaration's copy is one
	}
	st := obj.DeclarationStatus()
	st.Summary.Results = st.Summary.Results.WithoutChurn()
	if r, ok := d.(ChurnRemover); ok {
		r.RemoveChurn(obj)
	}
	return obj
}

// MinPositive is the sooner of two wakes, a wake of zero or less being none.
func MinPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
