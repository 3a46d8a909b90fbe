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
		Short: "Show and steer FleetPolicy rollouts: wave state, approvals, pause and resume",
		Long: `A FleetPolicy with spec.rollout is rolled out in waves of clusters: each wave first runs the
policy in Audit and is promoted to Enforce when its gate holds on fresh agent results (max fail
results, max would-be-blocked admissions, soak time, and a manual approval when the gate asks for
one); then the next wave starts. A new template version (a new revision) rolls out the same way.

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

// fleetPolicyName reads a FleetPolicy argument: NAME or fp/NAME (as `status` does).
func fleetPolicyName(arg string) (string, error) {
	ref, err := parseDeclarationRef(arg)
	if err != nil {
		return "", err
	}
	if ref.kind != kindFleetPolicy {
		return "", usageError{fmt.Errorf("%q: rollouts are FleetPolicy's (spec.rollout), not ApplicationPolicy's", arg)}
	}
	return ref.name, nil
}

// errNoRollout is the error for a FleetPolicy without spec.rollout.
func errNoRollout(name string) error {
	return fmt.Errorf("FleetPolicy %s has no spec.rollout", name)
}

// getFleetPolicy reads one FleetPolicy, with a plain "not found" when it does not exist.
func getFleetPolicy(ctx context.Context, c client.Client, name string) (*policyhubv1.FleetPolicy, error) {
	fp := &policyhubv1.FleetPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
		if apierrors.IsNotFound(err) && !isMissingCRD(err) {
			return nil, fmt.Errorf("FleetPolicy %q not found", name)
		}
		return nil, fmt.Errorf("read FleetPolicy %s: %w", name, err)
	}
	return fp, nil
}

// rolloutPolicyNames completes FLEETPOLICY arguments: the FleetPolicies with spec.rollout.
func (o *options) rolloutPolicyNames(ctx context.Context) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	list := &policyhubv1.FleetPolicyList{}
	if c.List(ctx, list) != nil {
		return nil
	}
	var names []string
	for _, fp := range list.Items {
		if fp.Spec.Rollout != nil {
			names = append(names, fp.Name)
		}
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
	Since     string
	Reason    string
}

// rolloutRows is one row per wave, in spec order, of every FleetPolicy with spec.rollout, by
// policy name; ages are taken at now.
func rolloutRows(fps []policyhubv1.FleetPolicy, now time.Time) []rolloutRow {
	sorted := slices.Clone(fps)
	slices.SortFunc(sorted, func(a, b policyhubv1.FleetPolicy) int { return strings.Compare(a.Name, b.Name) })
	var rows []rolloutRow
	for i := range sorted {
		fp := &sorted[i]
		if fp.Spec.Rollout == nil {
			continue
		}
		st := fp.Status.Rollout
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
		for _, w := range fp.Spec.Rollout.Waves {
			row := rolloutRow{Policy: fp.Name, Revision: st.Revision, Wave: w.Name, Phase: string(policyhubv1.WavePending), Since: "-"}
			if ws, ok := byName[w.Name]; ok {
				row.HasStatus = true
				if ws.Phase != "" {
					row.Phase = string(ws.Phase)
				}
				row.Clusters, row.Fail, row.Blocked, row.Reason = ws.Clusters, ws.Fail, ws.Blocked, ws.Reason
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
		if fp.Spec.Rollout.Paused && len(rows) > first {
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
	tableRow(w, "POLICY", "REVISION", "WAVE", "CURRENT", "PHASE", "CLUSTERS", "FAIL", "BLOCKED", "SINCE", "REASON")
	for _, r := range rows {
		current := ""
		if r.Current {
			current = "*"
		}
		clusters, fail, blocked := "-", "-", "-"
		if r.HasStatus {
			clusters = itoa(int64(r.Clusters))
		}
		if r.Measured {
			fail, blocked = itoa(r.Fail), itoa(r.Blocked)
		}
		tableRow(w, r.Policy, shortRevision(r.Revision), r.Wave, current, r.Phase, clusters, fail, blocked, r.Since, oneLine(r.Reason))
	}
}

// rolloutPolicies reads the named FleetPolicies (each must have spec.rollout), or without names
// every FleetPolicy that has one.
func rolloutPolicies(ctx context.Context, c client.Client, names []string) ([]policyhubv1.FleetPolicy, error) {
	if len(names) == 0 {
		list := &policyhubv1.FleetPolicyList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list FleetPolicies: %w", err)
		}
		return slices.DeleteFunc(list.Items, func(fp policyhubv1.FleetPolicy) bool { return fp.Spec.Rollout == nil }), nil
	}
	var fps []policyhubv1.FleetPolicy
	for _, name := range names {
		if slices.ContainsFunc(fps, func(fp policyhubv1.FleetPolicy) bool { return fp.Name == name }) {
			continue
		}
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if fp.Spec.Rollout == nil {
			return nil, errNoRollout(name)
		}
		fps = append(fps, *fp)
	}
	return fps, nil
}

// rolloutStatusReport is -o json|yaml: each policy's status.rollout by name (null before the hub
// started its rollout).
func rolloutStatusReport(fps []policyhubv1.FleetPolicy) map[string]*policyhubv1.RolloutStatus {
	report := make(map[string]*policyhubv1.RolloutStatus, len(fps))
	for _, fp := range fps {
		report[fp.Name] = fp.Status.Rollout
	}
	return report
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status [FLEETPOLICY...]",
		Short: "Show each wave of the FleetPolicies' rollouts: phase, clusters, measured gate values, why it waits",
		Long: `Show one row per wave, in spec order, of every FleetPolicy with spec.rollout (or of those named;
naming one without spec.rollout is an error).

REVISION is the start of the template version being rolled out (the full one is in -o json).
CURRENT marks the wave the rollout is at (none once every wave is Done). PHASE is Pending,
Auditing, Waiting, Enforcing or Done; a wave the hub has not written status for is Pending.
CLUSTERS counts the wave's clusters; FAIL and BLOCKED are the last measured fail results and
would-be-blocked admissions in them (what the gate compares with maxFail and maxBlocked; "-"
before the wave is reached). SINCE is how long the wave has been in its phase. REASON says why
the wave waits, with the measured values; a paused rollout shows "(paused)" on its current wave
(on its first wave when none is current).

-o json|yaml prints {"<policy>": status.rollout} (null before the hub started the rollout): each
with "revision", "currentWave", "waves": [{"name", "phase", "since", "clusters", "syncedAt",
"holdingSince", "fail", "blocked", "reason"}] and "stable": {"revision", "template"}.`,
		Example: `  # Every rollout
  kubectl policyhub rollout status

  # One FleetPolicy's rollout, as JSON
  kubectl policyhub rollout status disallow-latest-tag -o json`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			names := slices.DeleteFunc(o.rolloutPolicyNames(cmd.Context()), func(n string) bool { return slices.Contains(args, n) })
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, arg := range args {
				name, err := fleetPolicyName(arg)
				if err != nil {
					return err
				}
				names = append(names, name)
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			fps, err := rolloutPolicies(cmd.Context(), c, names)
			if err != nil {
				return err
			}
			if err := o.printReport(rolloutStatusReport(fps), func(w io.Writer) error {
				printRolloutTable(w, rolloutRows(fps, time.Now()))
				return nil
			}); err != nil {
				return err
			}
			if len(fps) == 0 && o.output == "table" {
				fmt.Fprintln(o.streams.ErrOut, "No FleetPolicy has spec.rollout.")
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
	FleetPolicy string `json:"fleetPolicy"`
	Wave        string `json:"wave"`
	Revision    string `json:"revision"`
	// Approvals is the annotation's value now.
	Approvals string `json:"approvals"`
	// Changed is false when the wave was already approved for the revision.
	Changed bool `json:"changed"`
	// Warnings: the approval was recorded, but may not do what was meant.
	Warnings []string `json:"warnings,omitempty"`
}

// approveRollout approves wave of FleetPolicy name for the revision its status rolls out.
func approveRollout(ctx context.Context, c client.Client, name, wave string) (*approveResult, error) {
	var res *approveResult
	// The annotation is one string holding every wave's approval: a blind write could drop
	// another wave's approval written meanwhile, so the patch carries the resourceVersion it was
	// computed from, and is recomputed on conflict.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return err
		}
		if fp.Spec.Rollout == nil {
			return errNoRollout(name)
		}
		i := slices.IndexFunc(fp.Spec.Rollout.Waves, func(w policyhubv1.RolloutWave) bool { return w.Name == wave })
		if i < 0 {
			return fmt.Errorf("FleetPolicy %s has no wave %q in spec.rollout.waves (waves: %s)", name, wave, strings.Join(waveNames(fp.Spec.Rollout), ", "))
		}
		if fp.Status.Rollout == nil || fp.Status.Rollout.Revision == "" {
			return fmt.Errorf("FleetPolicy %s: the hub has not started the rollout yet (status.rollout.revision is empty), so there is no revision to approve: retry once `kubectl policyhub rollout status %s` shows one", name, name)
		}
		revision := fp.Status.Rollout.Revision
		res = &approveResult{FleetPolicy: name, Wave: wave, Revision: revision}
		if !fp.Spec.Rollout.Waves[i].Gate.Approval {
			res.Warnings = append(res.Warnings, fmt.Sprintf("wave %s's gate does not ask for an approval (gate.approval is false): it is recorded, and changes nothing", wave))
		}
		if fp.Status.ObservedGeneration != fp.Generation {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the hub has not processed the latest spec of FleetPolicy %s yet: the approval is for revision %s, the one its status shows, and does not count if the template changed", name, revision))
		}
		old := fp.Annotations[policyhubv1.AnnotationRolloutApproved]
		res.Approvals = approveWave(old, wave, revision)
		if !policyhubv1.RolloutApproved(map[string]string{policyhubv1.AnnotationRolloutApproved: res.Approvals}, wave, revision) {
			// Only a revision the annotation cannot hold gets here (the hub writes hashes).
			return fmt.Errorf("FleetPolicy %s: revision %q cannot be written in annotation %s", name, revision, policyhubv1.AnnotationRolloutApproved)
		}
		if res.Approvals == old {
			return nil
		}
		orig := fp.DeepCopy()
		if fp.Annotations == nil {
			fp.Annotations = map[string]string{}
		}
		fp.Annotations[policyhubv1.AnnotationRolloutApproved] = res.Approvals
		if err := c.Patch(ctx, fp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch FleetPolicy %s: %w", name, err)
		}
		res.Changed = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("approve wave %s of FleetPolicy %s: the object kept changing meanwhile, try again: %w", wave, name, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func newRolloutApproveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "approve FLEETPOLICY WAVE",
		Short: "Approve a wave of a FleetPolicy's rollout for the revision being rolled out",
		Long: `Approve WAVE of FLEETPOLICY's rollout for the revision the hub is rolling out (status.rollout.revision):
the wave is promoted to Enforce once its gate also holds. The approval is the entry
WAVE@REVISION in the FleetPolicy's annotation policyhub.io/rollout-approved; entries for other
revisions are removed, since an approval never carries over to another template version.
Approving again changes nothing.

It is an error when WAVE is not one of spec.rollout.waves, or when the hub has not started the
rollout (no revision yet). The annotation is written with a merge patch conditional on the
object's resourceVersion (retried on conflict), so nothing else on the object is lost.

-o json|yaml prints {"fleetPolicy", "wave", "revision", "approvals" (the annotation's value),
"changed", "warnings"}.`,
		Example: `  # Let the prod wave be promoted once its gate holds
  kubectl policyhub rollout approve disallow-latest-tag prod`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return o.rolloutPolicyNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
			case 1:
				c, err := o.hubClient()
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				name, err := fleetPolicyName(args[0])
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				fp, err := getFleetPolicy(cmd.Context(), c, name)
				if err != nil || fp.Spec.Rollout == nil {
					return nil, cobra.ShellCompDirectiveError
				}
				return waveNames(fp.Spec.Rollout), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("approve takes FLEETPOLICY WAVE (got %d arguments)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := fleetPolicyName(args[0])
			if err != nil {
				return err
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			res, err := approveRollout(cmd.Context(), c, name, args[1])
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(o.streams.ErrOut, "warning: %s\n", w)
			}
			return o.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "fleetpolicy/%s: wave %s approved for revision %s%s\n", res.FleetPolicy, res.Wave, res.Revision, unchanged(res.Changed))
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
	FleetPolicy string `json:"fleetPolicy"`
	Paused      bool   `json:"paused"`
	// Changed is false when the rollout already was paused (pause) or running (resume).
	Changed bool `json:"changed"`
}

// setRolloutPaused sets spec.rollout.paused of FleetPolicy name.
func setRolloutPaused(ctx context.Context, c client.Client, name string, paused bool) (*pauseResult, error) {
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	fp, err := getFleetPolicy(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if fp.Spec.Rollout == nil {
		return nil, errNoRollout(name)
	}
	res := &pauseResult{FleetPolicy: name, Paused: paused}
	if fp.Spec.Rollout.Paused == paused {
		return res, nil
	}
	// One field, set whatever else changed meanwhile: no resourceVersion needed. Should
	// spec.rollout be removed in between, the patch would recreate it without waves, which the
	// API server refuses (waves is required).
	patch := fmt.Appendf(nil, `{"spec":{"rollout":{"paused":%t}}}`, paused)
	if err := c.Patch(ctx, fp, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("%s the rollout of FleetPolicy %s: %w", verb, name, err)
	}
	res.Changed = true
	return res, nil
}

func newRolloutPauseCommand(o *options, paused bool) *cobra.Command {
	verb, done := "resume", "resumed"
	short := "Resume a paused FleetPolicy rollout (spec.rollout.paused=false)"
	long := `Resume FLEETPOLICY's rollout: set spec.rollout.paused to false, so the hub moves its waves on
again as their gates hold. Resuming a rollout that is not paused changes nothing.`
	if paused {
		verb, done = "pause", "paused"
		short = "Pause a FleetPolicy rollout: every wave holds where it is (spec.rollout.paused=true)"
		long = `Pause FLEETPOLICY's rollout: set spec.rollout.paused to true, so the hub holds every wave where it
is (no wave is promoted, no next wave starts) until ` + "`kubectl policyhub rollout resume`" + `. Pausing a
paused rollout changes nothing.`
	}
	long += `

It is an error when the FleetPolicy has no spec.rollout. The field is written with a merge patch,
so nothing else on the object is lost.

-o json|yaml prints {"fleetPolicy", "paused", "changed"}.`
	return &cobra.Command{
		Use:     verb + " FLEETPOLICY",
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
				return usageError{fmt.Errorf("%s takes one FLEETPOLICY (got %d arguments)", verb, len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := fleetPolicyName(args[0])
			if err != nil {
				return err
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			res, err := setRolloutPaused(cmd.Context(), c, name, paused)
			if err != nil {
				return err
			}
			return o.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "fleetpolicy/%s: rollout %s%s\n", name, done, unchanged(res.Changed))
				return err
			})
		},
	}
}
