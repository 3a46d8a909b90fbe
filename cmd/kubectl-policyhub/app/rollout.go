package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func init() { commands = append(commands, newRolloutCommand) }

// rolloutRetry paces the approval's optimistic-lock retries: every status write of the hub bumps
// the FleetPolicy's resourceVersion, so a conflict is likely on a busy policy and cheap to retry.
var rolloutRetry = wait.Backoff{Steps: 8, Duration: 50 * time.Millisecond, Factor: 1.5, Jitter: 0.2}

// revisionWidth is how much of a revision the table shows (the full one is in -o json|yaml).
const revisionWidth = 12

func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Show and steer FleetPolicy and PolicySet rollouts: wave state, approvals, pause and resume",
		Long: `A FleetPolicy or PolicySet with spec.rollout is rolled out in waves of clusters: each wave first runs
its policies in Audit and is promoted to Enforce when its gate holds on fresh agent results (max
fail results, max refused admissions (server-side dry-runs left out), soak time, and a manual approval when the gate asks
for one); then the next wave starts. A new version (a new template, a new version of a set's
source: a new revision) rolls out the same way. Name a PolicySet pset/NAME.

  status    each wave's phase and the measured gate values
  approve   approve one wave for the revision being rolled out
  pause     hold every wave where it is
  resume    let the rollout go on`,
		Example: `  kubectl policyhub rollout status
  kubectl policyhub rollout approve disallow-latest-tag prod
  kubectl policyhub rollout pause disallow-latest-tag`,
		// Without RunE cobra would print the help and exit 0 for a mistyped subcommand.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for rollout: choose status, approve, pause or resume", args[0])}
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newRolloutStatusCommand(o), newRolloutApproveCommand(o),
		newRolloutPauseCommand(o, true), newRolloutPauseCommand(o, false))
	return cmd
}

// rolled is a declaration that rolls out in waves: a FleetPolicy or a PolicySet.
type rolled struct {
	kind, name string
	obj        client.Object
	spec       *policyhubv1.Rollout
	status     *policyhubv1.RolloutStatus
	// generation and observed (status.observedGeneration) tell whether the hub has processed the
	// latest spec.
	generation, observed int64
}

func rolledFleetPolicy(fp *policyhubv1.FleetPolicy) rolled {
	return rolled{kind: kindFleetPolicy, name: fp.Name, obj: fp, spec: fp.Spec.Rollout, status: fp.Status.Rollout, generation: fp.Generation, observed: fp.Status.ObservedGeneration}
}

func rolledPolicySet(ps *policyhubv1.PolicySet) rolled {
	return rolled{kind: kindPolicySet, name: ps.Name, obj: ps, spec: ps.Spec.Rollout, status: ps.Status.Rollout, generation: ps.Generation, observed: ps.Status.ObservedGeneration}
}

// String names the declaration as the commands print it: NAME for a FleetPolicy, pset/NAME for a
// PolicySet (how it is named on the command line).
func (r rolled) String() string {
	if r.kind == kindPolicySet {
		return "pset/" + r.name
	}
	return r.name
}

// rolloutRef reads a rollout argument: NAME or fp/NAME (a FleetPolicy), pset/NAME (a PolicySet),
// as `status` does.
func rolloutRef(arg string) (declarationRef, error) {
	ref, err := parseDeclarationRef(arg)
	if err != nil {
		return declarationRef{}, err
	}
	if ref.kind == kindApplicationPolicy {
		return declarationRef{}, usageError{fmt.Errorf("%q: rollouts are FleetPolicy's and PolicySet's (spec.rollout), not ApplicationPolicy's", arg)}
	}
	return ref, nil
}

// errNoRollout is the error for a declaration without spec.rollout.
func errNoRollout(r rolled) error {
	return fmt.Errorf("%s %s has no spec.rollout", r.kind, r.name)
}

// getRolled reads one FleetPolicy or PolicySet, with a plain "not found" when it does not exist.
func getRolled(ctx context.Context, c client.Client, ref declarationRef) (rolled, error) {
	var obj client.Object = &policyhubv1.FleetPolicy{}
	if ref.kind == kindPolicySet {
		obj = &policyhubv1.PolicySet{}
	}
	if err := c.Get(ctx, client.ObjectKey{Name: ref.name}, obj); err != nil {
		if apierrors.IsNotFound(err) && !isMissingCRD(err) {
			return rolled{}, fmt.Errorf("%s %q not found", ref.kind, ref.name)
		}
		return rolled{}, fmt.Errorf("read %s %s: %w", ref.kind, ref.name, err)
	}
	if ps, ok := obj.(*policyhubv1.PolicySet); ok {
		return rolledPolicySet(ps), nil
	}
	return rolledFleetPolicy(obj.(*policyhubv1.FleetPolicy)), nil
}

// rolloutPolicyNames completes rollout arguments: the FleetPolicies (NAME) and PolicySets
// (pset/NAME) with spec.rollout.
func (o *options) rolloutPolicyNames(ctx context.Context) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	all, err := rolloutPolicies(ctx, c, nil)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(all))
	for _, r := range all {
		names = append(names, r.String())
	}
	return names
}

// --- rollout status ---

// rolloutRow is one wave of one FleetPolicy in the status table.
type rolloutRow struct {
	Policy   string
	Revision string
	Wave     string
	Current  bool
	Phase    string
	// Measured is false when the wave has no status yet, or nothing is measured in its phase.
	Measured bool
	// HasStatus is false for a wave the hub has not written status for.
	HasStatus bool
	Clusters  int32
	Fail      int64
	Blocked   int64
	// LegacyObjects is the wave's measured Kyverno legacy objects, when its gate bounds them.
	LegacyObjects *int64
	Since         string
	Reason        string
}

// rolloutRows is one row per wave, in spec order, of every declaration with spec.rollout, by
// name (FleetPolicies first); ages are taken at now.
func rolloutRows(all []rolled, now time.Time) []rolloutRow {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b rolled) int { return strings.Compare(a.kind+"/"+a.name, b.kind+"/"+b.name) })
	var rows []rolloutRow
	for i := range sorted {
		fp := &sorted[i]
		if fp.spec == nil {
			continue
		}
		st := fp.status
		if st == nil {
			st = &policyhubv1.RolloutStatus{}
		}
		// Status waves by name: the spec decides which waves exist and their order; status of a
		// wave since removed from the spec is stale and not shown.
		byName := make(map[string]policyhubv1.WaveStatus, len(st.Waves))
		for _, w := range st.Waves {
			byName[w.Name] = w
		}
		first := len(rows)
		current := -1
		for _, w := range fp.spec.Waves {
			row := rolloutRow{Policy: fp.String(), Revision: st.Revision, Wave: w.Name, Phase: string(policyhubv1.WavePending), Since: "-"}
			if ws, ok := byName[w.Name]; ok {
				row.HasStatus = true
				if ws.Phase != "" {
					row.Phase = string(ws.Phase)
				}
				row.Clusters, row.Fail, row.Blocked, row.Reason, row.LegacyObjects = ws.Clusters, ws.Fail, ws.Blocked, ws.Reason, ws.LegacyObjects
				// A Pending wave has measured nothing for this revision: its zeros would read as
				// a passing gate.
				row.Measured = ws.Phase != policyhubv1.WavePending && ws.Phase != ""
				if ws.Since != nil {
					row.Since = humanAge(ws.Since, now)
				}
			}
			if st.CurrentWave != "" && w.Name == st.CurrentWave {
				row.Current = true
				current = len(rows)
			}
			rows = append(rows, row)
		}
		if fp.spec.Paused && len(rows) > first {
			// Paused holds the policy's rollout where it is: say so on the wave it holds, or on
			// the first wave when none is current (not started, or every wave done).
			at := current
			if at < 0 {
				at = first
			}
			rows[at].Reason = strings.TrimSpace("(paused) " + rows[at].Reason)
		}
	}
	return rows
}

// shortRevision is the start of a revision's hash, as git shortens commits ("sha256:" dropped).
func shortRevision(r string) string {
	if _, hash, ok := strings.Cut(r, ":"); ok {
		r = hash
	}
	if len(r) > revisionWidth {
		return r[:revisionWidth]
	}
	return r
}

func printRolloutTable(w io.Writer, rows []rolloutRow) {
	if len(rows) == 0 {
		return
	}
	tableRow(w, "POLICY", "REVISION", "WAVE", "CURRENT", "PHASE", "CLUSTERS", "FAIL", "BLOCKED", "LEGACY", "SINCE", "REASON")
	for _, r := range rows {
		current := ""
		if r.Current {
			current = "*"
		}
		clusters, fail, blocked, legacy := "-", "-", "-", "-"
		if r.HasStatus {
			clusters = itoa(int64(r.Clusters))
		}
		if r.Measured {
			fail, blocked = itoa(r.Fail), itoa(r.Blocked)
			if r.LegacyObjects != nil {
				legacy = itoa(*r.LegacyObjects)
			}
		}
		tableRow(w, r.Policy, shortRevision(r.Revision), r.Wave, current, r.Phase, clusters, fail, blocked, legacy, r.Since, oneLine(r.Reason))
	}
}

// rolloutPolicies reads the named declarations (each must have spec.rollout), or without names
// every FleetPolicy and PolicySet that has one.
func rolloutPolicies(ctx context.Context, c client.Client, refs []declarationRef) ([]rolled, error) {
	if len(refs) == 0 {
		fps := &policyhubv1.FleetPolicyList{}
		if err := c.List(ctx, fps); err != nil {
			return nil, fmt.Errorf("list FleetPolicies: %w", err)
		}
		var all []rolled
		for i := range fps.Items {
			if fps.Items[i].Spec.Rollout != nil {
				all = append(all, rolledFleetPolicy(&fps.Items[i]))
			}
		}
		sets := &policyhubv1.PolicySetList{}
		// A hub from before PolicySets serves no such kind: it has none to show.
		if err := c.List(ctx, sets); err != nil && !isMissingCRD(err) {
			return nil, fmt.Errorf("list PolicySets: %w", err)
		}
		for i := range sets.Items {
			if sets.Items[i].Spec.Rollout != nil {
				all = append(all, rolledPolicySet(&sets.Items[i]))
			}
		}
		return all, nil
	}
	var all []rolled
	for _, ref := range refs {
		if slices.ContainsFunc(all, func(r rolled) bool { return r.kind == ref.kind && r.name == ref.name }) {
			continue
		}
		r, err := getRolled(ctx, c, ref)
		if err != nil {
			return nil, err
		}
		if r.spec == nil {
			return nil, errNoRollout(r)
		}
		all = append(all, r)
	}
	return all, nil
}

// rolloutStatusReport is -o json|yaml: each declaration's status.rollout by name (pset/NAME for a
// PolicySet; null before the hub started its rollout).
func rolloutStatusReport(all []rolled) map[string]*policyhubv1.RolloutStatus {
	report := make(map[string]*policyhubv1.RolloutStatus, len(all))
	for _, r := range all {
		report[r.String()] = r.status
	}
	return report
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status [FLEETPOLICY | pset/POLICYSET ...]",
		Short: "Show each wave of the FleetPolicies' and PolicySets' rollouts: phase, clusters, measured gate values, why it waits",
		Long: `Show one row per wave, in spec order, of every FleetPolicy and PolicySet with spec.rollout (or of
those named: NAME or fp/NAME a FleetPolicy, pset/NAME a PolicySet; naming one without spec.rollout
is an error).

REVISION is the start of the version being rolled out: a FleetPolicy's template hash, a
PolicySet's source digest (the full one is in -o json).
CURRENT marks the wave the rollout is at (none once every wave is Done). PHASE is Pending,
Auditing, Waiting, Enforcing or Done; a wave the hub has not written status for is Pending.
CLUSTERS counts the wave's clusters; FAIL and BLOCKED are the last measured fail results and
refused admissions in them (what the gate compares with maxFail and maxBlocked; "-" before the
wave is reached). BLOCKED counts Kyverno's refusals as its Events record them (about the last
hour), server-side dry-runs (kubectl apply --dry-run=server, a CI's checks) left out: each agent
counts them from Kyverno's metrics, for ClusterPolicy and Policy. A CEL policy's dry-runs, and
every dry-run in a cluster whose agent could not read Kyverno's metrics, are counted: REASON
names those clusters. LEGACY is the last measured sum of Kyverno legacy objects in the wave's
clusters, when its gate has maxLegacyObjects ("-" otherwise): the wave holds until each cluster
reports at most that many (owned by policyhub or not; kubectl policyhub inventory lists them), and
a cluster whose agent reported no inventory holds it too. SINCE is how long the wave has been in
its phase. REASON says why
the wave waits, with the measured values; a paused rollout shows "(paused)" on its current wave
(on its first wave when none is current).

-o json|yaml prints {"<policy>": status.rollout} (null before the hub started the rollout; a
PolicySet's key is pset/NAME): each with "revision", "currentWave", "waves": [{"name", "phase",
"since", "clusters", "syncedAt", "holdingSince", "fail", "blocked", "legacyObjects", "reason"}] and "stable":
{"revision", "template" (a FleetPolicy's), "snapshot" (a PolicySet's)}.`,
		Example: `  # Every rollout
  kubectl policyhub rollout status

  # One FleetPolicy's rollout, as JSON
  kubectl policyhub rollout status disallow-latest-tag -o json

  # A PolicySet's rollout
  kubectl policyhub rollout status pset/pss-baseline`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			names := slices.DeleteFunc(o.rolloutPolicyNames(cmd.Context()), func(n string) bool { return slices.Contains(args, n) })
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var refs []declarationRef
			for _, arg := range args {
				ref, err := rolloutRef(arg)
				if err != nil {
					return err
				}
				refs = append(refs, ref)
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			all, err := rolloutPolicies(cmd.Context(), c, refs)
			if err != nil {
				return err
			}
			if err := o.printReport(rolloutStatusReport(all), func(w io.Writer) error {
				printRolloutTable(w, rolloutRows(all, time.Now()))
				return nil
			}); err != nil {
				return err
			}
			if len(all) == 0 && o.output == "table" {
				fmt.Fprintln(o.streams.ErrOut, "No FleetPolicy or PolicySet has spec.rollout.")
			}
			return nil
		},
	}
}

// --- rollout approve ---

// approveWave is the annotation value that approves wave for revision: value's entries for
// revision, plus wave@revision, sorted and deduplicated. Entries for other revisions are dropped:
// they approve templates no longer being rolled out, and kept they would let a revert to one of
// those templates skip its approval.
func approveWave(value, wave, revision string) string {
	keep := []policyhubv1.RolloutApproval{{Wave: wave, Revision: revision}}
	for _, a := range policyhubv1.ParseRolloutApprovals(value) {
		if a.Revision == revision {
			keep = append(keep, a)
		}
	}
	return policyhubv1.FormatRolloutApprovals(keep)
}

// waveNames are the names of the rollout's waves, in order.
func waveNames(r *policyhubv1.Rollout) []string {
	names := make([]string, 0, len(r.Waves))
	for _, w := range r.Waves {
		names = append(names, w.Name)
	}
	return names
}

// approveResult is -o json|yaml of `rollout approve`.
type approveResult struct {
	// FleetPolicy or PolicySet names the declaration approved.
	FleetPolicy string `json:"fleetPolicy,omitempty"`
	PolicySet   string `json:"policySet,omitempty"`
	Wave        string `json:"wave"`
	Revision    string `json:"revision"`
	// Approvals is the annotation's value now.
	Approvals string `json:"approvals"`
	// Changed is false when the wave was already approved for the revision.
	Changed bool `json:"changed"`
	// Warnings: the approval was recorded, but may not do what was meant.
	Warnings []string `json:"warnings,omitempty"`
}

// approveRollout approves wave of the declaration for the revision its status rolls out.
func approveRollout(ctx context.Context, c client.Client, ref declarationRef, wave string) (*approveResult, error) {
	var res *approveResult
	// The annotation is one string holding every wave's approval: a blind write could drop
	// another wave's approval written meanwhile, so the patch carries the resourceVersion it was
	// computed from, and is recomputed on conflict.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		r, err := getRolled(ctx, c, ref)
		if err != nil {
			return err
		}
		if r.spec == nil {
			return errNoRollout(r)
		}
		i := slices.IndexFunc(r.spec.Waves, func(w policyhubv1.RolloutWave) bool { return w.Name == wave })
		if i < 0 {
			return fmt.Errorf("%s %s has no wave %q in spec.rollout.waves (waves: %s)", r.kind, r.name, wave, strings.Join(waveNames(r.spec), ", "))
		}
		if r.status == nil || r.status.Revision == "" {
			return fmt.Errorf("%s %s: the hub has not started the rollout yet (status.rollout.revision is empty), so there is no revision to approve: retry once `kubectl policyhub rollout status %s` shows one", r.kind, r.name, r)
		}
		revision := r.status.Revision
		res = &approveResult{Wave: wave, Revision: revision}
		if r.kind == kindPolicySet {
			res.PolicySet = r.name
		} else {
			res.FleetPolicy = r.name
		}
		if !r.spec.Waves[i].Gate.Approval {
			res.Warnings = append(res.Warnings, fmt.Sprintf("wave %s's gate does not ask for an approval (gate.approval is false): it is recorded, and changes nothing", wave))
		}
		if r.observed != r.generation {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the hub has not processed the latest spec of %s %s yet: the approval is for revision %s, the one its status shows, and does not count if the version changed", r.kind, r.name, revision))
		}
		obj := r.obj
		old := obj.GetAnnotations()[policyhubv1.AnnotationRolloutApproved]
		res.Approvals = approveWave(old, wave, revision)
		if !policyhubv1.RolloutApproved(map[string]string{policyhubv1.AnnotationRolloutApproved: res.Approvals}, wave, revision) {
			// Only a revision the annotation cannot hold gets here (the hub writes hashes).
			return fmt.Errorf("%s %s: revision %q cannot be written in annotation %s", r.kind, r.name, revision, policyhubv1.AnnotationRolloutApproved)
		}
		if res.Approvals == old {
			return nil
		}
		orig := obj.DeepCopyObject().(client.Object)
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[policyhubv1.AnnotationRolloutApproved] = res.Approvals
		obj.SetAnnotations(annotations)
		if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch %s %s: %w", r.kind, r.name, err)
		}
		res.Changed = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("approve wave %s of %s %s: the object kept changing meanwhile, try again: %w", wave, ref.kind, ref.name, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func newRolloutApproveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "approve (FLEETPOLICY | pset/POLICYSET) WAVE",
		Short: "Approve a wave of a FleetPolicy's or PolicySet's rollout for the revision being rolled out",
		Long: `Approve WAVE of the rollout of FLEETPOLICY (or of PolicySet POLICYSET, named pset/POLICYSET) for the
revision the hub is rolling out (status.rollout.revision): the wave is promoted to Enforce once its
gate also holds. The approval is the entry WAVE@REVISION in the declaration's annotation
policyhub.io/rollout-approved; entries for other revisions are removed, since an approval never
carries over to another version. Approving again changes nothing.

It is an error when WAVE is not one of spec.rollout.waves, or when the hub has not started the
rollout (no revision yet). The annotation is written with a merge patch conditional on the
object's resourceVersion (retried on conflict), so nothing else on the object is lost.

-o json|yaml prints {"fleetPolicy" or "policySet", "wave", "revision", "approvals" (the
annotation's value), "changed", "warnings"}.`,
		Example: `  # Let the prod wave be promoted once its gate holds
  kubectl policyhub rollout approve disallow-latest-tag prod

  # A PolicySet's
  kubectl policyhub rollout approve pset/pss-baseline prod`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return o.rolloutPolicyNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
			case 1:
				c, err := o.hubClient()
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				ref, err := rolloutRef(args[0])
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				r, err := getRolled(cmd.Context(), c, ref)
				if err != nil || r.spec == nil {
					return nil, cobra.ShellCompDirectiveError
				}
				return waveNames(r.spec), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("approve takes FLEETPOLICY (or pset/POLICYSET) WAVE (got %d arguments)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := rolloutRef(args[0])
			if err != nil {
				return err
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			res, err := approveRollout(cmd.Context(), c, ref, args[1])
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(o.streams.ErrOut, "warning: %s\n", w)
			}
			return o.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s/%s: wave %s approved for revision %s%s\n", strings.ToLower(ref.kind), ref.name, res.Wave, res.Revision, unchanged(res.Changed))
				return err
			})
		},
	}
}

// unchanged is kubectl's " (unchanged)" suffix for a command that had nothing to write.
func unchanged(changed bool) string {
	if changed {
		return ""
	}
	return " (unchanged)"
}

// --- rollout pause / resume ---

// pauseResult is -o json|yaml of `rollout pause` and `rollout resume`.
type pauseResult struct {
	// FleetPolicy or PolicySet names the declaration.
	FleetPolicy string `json:"fleetPolicy,omitempty"`
	PolicySet   string `json:"policySet,omitempty"`
	Paused      bool   `json:"paused"`
	// Changed is false when the rollout already was paused (pause) or running (resume).
	Changed bool `json:"changed"`
}

// setRolloutPaused sets spec.rollout.paused of the declaration.
func setRolloutPaused(ctx context.Context, c client.Client, ref declarationRef, paused bool) (*pauseResult, error) {
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	r, err := getRolled(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	if r.spec == nil {
		return nil, errNoRollout(r)
	}
	res := &pauseResult{Paused: paused}
	if r.kind == kindPolicySet {
		res.PolicySet = r.name
	} else {
		res.FleetPolicy = r.name
	}
	if r.spec.Paused == paused {
		return res, nil
	}
	// One field, set whatever else changed meanwhile: no resourceVersion needed. Should
	// spec.rollout be removed in between, the patch would recreate it without waves, which the
	// API server refuses (waves is required).
	patch := fmt.Appendf(nil, `{"spec":{"rollout":{"paused":%t}}}`, paused)
	if err := c.Patch(ctx, r.obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("%s the rollout of %s %s: %w", verb, r.kind, r.name, err)
	}
	res.Changed = true
	return res, nil
}

func newRolloutPauseCommand(o *options, paused bool) *cobra.Command {
	verb, done := "resume", "resumed"
	short := "Resume a paused FleetPolicy or PolicySet rollout (spec.rollout.paused=false)"
	long := `Resume the rollout of FLEETPOLICY (or of PolicySet POLICYSET, named pset/POLICYSET): set
spec.rollout.paused to false, so the hub moves its waves on again as their gates hold. Resuming a
rollout that is not paused changes nothing.`
	if paused {
		verb, done = "pause", "paused"
		short = "Pause a FleetPolicy or PolicySet rollout: every wave holds where it is (spec.rollout.paused=true)"
		long = `Pause the rollout of FLEETPOLICY (or of PolicySet POLICYSET, named pset/POLICYSET): set
spec.rollout.paused to true, so the hub holds every wave where it is (no wave is promoted, no next
wave starts) until ` + "`kubectl policyhub rollout resume`" + `. Pausing a paused rollout changes nothing.`
	}
	long += `

It is an error when the declaration has no spec.rollout. The field is written with a merge patch,
so nothing else on the object is lost.

-o json|yaml prints {"fleetPolicy" or "policySet", "paused", "changed"}.`
	return &cobra.Command{
		Use:     verb + " (FLEETPOLICY | pset/POLICYSET)",
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  kubectl policyhub rollout %s disallow-latest-tag", verb),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.rolloutPolicyNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
		},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one FLEETPOLICY or pset/POLICYSET (got %d arguments)", verb, len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := rolloutRef(args[0])
			if err != nil {
				return err
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			res, err := setRolloutPaused(cmd.Context(), c, ref, paused)
			if err != nil {
				return err
			}
			return o.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s/%s: rollout %s%s\n", strings.ToLower(ref.kind), ref.name, done, unchanged(res.Changed))
				return err
			})
		},
	}
}
