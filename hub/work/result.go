package work

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// DeclarationResult is the outcome of one declaration in one cluster.
type DeclarationResult struct {
	Source  string
	Phase   policyhubv1.ClusterPhase
	Message string
	Actions policyhubv1.ActionCounts
	// Plan lists the changes of a dry-run (at most 20, with diffs); PlanTruncated counts the rest.
	Plan          []policyhubv1.PlannedChange
	PlanTruncated int32
	// Problems are the objects that failed or conflict, with why (at most maxProblems): which
	// members of a set need attention. Not kept in any status as such.
	Problems []policyhubv1.PlannedChange
	// InForce, for a Synced declaration, says whether Kyverno in the cluster has reported every
	// policy of it ready (see readiness.go); nil otherwise.
	InForce *bool
}

// ClusterResult is the outcome of one sync of one cluster.
type ClusterResult struct {
	Cluster string
	// Declarations, in the order given.
	Declarations []*DeclarationResult
	// Requests counts the requests sent to the cluster; Writes those that persisted something
	// (mutating and not dry-run), the Lease's included; DryRuns the mutating ones sent with
	// dryRun (dry-run declarations, drift checks: see verify.go).
	Requests, Writes, DryRuns int64
	Duration                  time.Duration
	// ReadTime, LockTime and WriteTime split Duration: reading the cluster, waiting for and
	// taking its Lease, writing (dry-runs included).
	ReadTime, LockTime, WriteTime time.Duration
	// Err is set when the cluster could not be read at all (unreachable, refused credentials).
	Err error
	// Flooded is true when the cluster was read directly, without a cache (see flood).
	Flooded bool
}

// maxPlan is how many changes a dry-run keeps in status per cluster (the API's limit).
const maxPlan = 20

// record fills declaration i's result from the plan.
func (r *ClusterResult) record(i int, w *workPlan, dryRun bool) {
	res := r.Declarations[i]
	var failures, conflicts []string
	for _, c := range w.changes {
		if c.decl != i {
			continue
		}
		obj := c.desired
		if obj == nil {
			obj = c.live
		}
		entry := policyhubv1.PlannedChange{
			Action: string(c.action), APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), Diff: c.diff, Message: c.message,
		}
		switch {
		case c.err != nil:
			res.Actions.Failed++
			entry.Action, entry.Message = string(ActionFailed), policyhubv1.TruncateMessage(c.err.Error(), 1024)
			failures = append(failures, fmt.Sprintf("%s: %v", plan.KeyOf(obj), c.err))
			res.problem(entry)
		case c.action == ActionCreate:
			res.Actions.Created++
		case c.action == ActionUpdate:
			res.Actions.Updated++
		case c.action == ActionDelete:
			res.Actions.Deleted++
		case c.action == ActionUnchanged:
			res.Actions.Unchanged++
		case c.action == ActionConflict:
			res.Actions.Conflict++
			conflicts = append(conflicts, c.message)
			res.problem(entry)
		}
		if dryRun && entry.Action != string(ActionUnchanged) {
			if len(res.Plan) < maxPlan {
				res.Plan = append(res.Plan, entry)
			} else {
				res.PlanTruncated++
			}
		}
	}
	a := res.Actions
	counts := fmt.Sprintf("created %d, updated %d, deleted %d, unchanged %d", a.Created, a.Updated, a.Deleted, a.Unchanged)
	switch {
	case len(failures) > 0:
		res.Phase, res.Message = policyhubv1.ClusterPhaseFailed, firstOf(failures)+" ("+counts+")"
	case len(conflicts) > 0:
		res.Phase, res.Message = policyhubv1.ClusterPhaseConflict, firstOf(conflicts)
	case dryRun:
		res.Phase = policyhubv1.ClusterPhaseDryRun
		res.Message = fmt.Sprintf("dry-run, nothing was persisted: would create %d, update %d, delete %d; %d unchanged", a.Created, a.Updated, a.Deleted, a.Unchanged)
	default:
		res.Phase, res.Message = policyhubv1.ClusterPhaseSynced, counts
	}
}

// maxProblems is how many failed or conflicting objects a result names.
const maxProblems = 10

// problem keeps an object that failed or conflicts, without its diff.
func (r *DeclarationResult) problem(c policyhubv1.PlannedChange) {
	if len(r.Problems) < maxProblems {
		c.Diff = ""
		r.Problems = append(r.Problems, c)
	}
}

// flooded says, in the message of each declaration synced (or planned) in a flooded cluster, that
// it was read directly and drift there is looked for at each recount (see flood).
func (r *ClusterResult) flooded(err *TooManyOwnedError) {
	r.Flooded = true
	for _, d := range r.Declarations {
		if d.Phase == policyhubv1.ClusterPhaseSynced || d.Phase == policyhubv1.ClusterPhaseDryRun {
			d.Message = policyhubv1.TruncateMessage(d.Message+"; "+err.Error(), 2048)
		}
	}
}

// notEnforced marks the result NotEnforced with message: not in force, whatever the cluster holds.
func (r *DeclarationResult) notEnforced(message string) {
	r.Phase, r.Message, r.InForce = policyhubv1.ClusterPhaseNotEnforced, message, ptr.To(false)
}

// fail marks the declarations of indexes which (all when nil) Failed with err.
func (r *ClusterResult) fail(which []int, err error) {
	if which == nil {
		for i := range r.Declarations {
			which = append(which, i)
		}
	}
	for _, i := range which {
		res := r.Declarations[i]
		res.Phase, res.Message = policyhubv1.ClusterPhaseFailed, policyhubv1.TruncateMessage(err.Error(), 2048)
	}
}

func firstOf(msgs []string) string {
	if len(msgs) == 1 {
		return policyhubv1.TruncateMessage(msgs[0], 1900)
	}
	return policyhubv1.TruncateMessage(msgs[0], 1900) + fmt.Sprintf(" (and %d more)", len(msgs)-1)
}

// logSync writes the one log line per cluster sync, with the counts.
func logSync(ctx context.Context, res *ClusterResult) {
	var total policyhubv1.ActionCounts
	phases := map[policyhubv1.ClusterPhase]int{}
	for _, d := range res.Declarations {
		total.Created += d.Actions.Created
		total.Updated += d.Actions.Updated
		total.Deleted += d.Actions.Deleted
		total.Failed += d.Actions.Failed
		total.Unchanged += d.Actions.Unchanged
		total.Conflict += d.Actions.Conflict
		phases[d.Phase]++
	}
	log.FromContext(ctx).Info(fmt.Sprintf("applied %d, updated %d, removed %d, failed %d, unchanged %d, conflicts %d",
		total.Created, total.Updated, total.Deleted, total.Failed, total.Unchanged, total.Conflict),
		"cluster", res.Cluster, "declarations", len(res.Declarations), "phases", phases,
		"requests", res.Requests, "writes", res.Writes, "dryRuns", res.DryRuns, "duration", res.Duration.Round(time.Millisecond).String(),
		"read", res.ReadTime.Round(time.Millisecond).String(), "lock", res.LockTime.Round(time.Millisecond).String(),
		"write", res.WriteTime.Round(time.Millisecond).String())
}
