package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

func init() { commands = append(commands, newStatusCommand) }

// Kinds of declaration, as printed.
const (
	kindFleetPolicy       = policyhubv1.KindFleetPolicy
	kindPolicySet         = policyhubv1.KindPolicySet
	kindApplicationPolicy = policyhubv1.KindApplicationPolicy
)

// statusReport is the -o json|yaml output of `status`.
type statusReport struct {
	Declarations []declarationStatus `json:"declarations"`
}

// declarationStatus is one FleetPolicy, PolicySet or ApplicationPolicy.
type declarationStatus struct {
	// Kind is FleetPolicy, PolicySet or ApplicationPolicy.
	Kind string `json:"kind"`
	// Namespace of an ApplicationPolicy; absent for a FleetPolicy.
	Namespace string `json:"namespace,omitempty"`
	// Name of the declaration.
	Name string `json:"name"`
	// Application of an ApplicationPolicy.
	Application string `json:"application,omitempty"`
	// Mode is the declared mode (Enforce or Audit); absent when a FleetPolicy keeps its template's.
	Mode string `json:"mode,omitempty"`
	// Engines are the engines that enforce what the declaration ships (Kyverno, Kubernetes,
	// Gatekeeper): a FleetPolicy's template's, a PolicySet's members' (several may be).
	Engines []string `json:"engines"`
	// Revision is a PolicySet's source revision (e.g. an OCI tag, main@sha1:…) and Digest the
	// version it pins; Members counts its members.
	Revision string `json:"revision,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Members  int32  `json:"members,omitempty"`
	// Source is a PolicySet's SourceReady condition: whether its source can be read, and if not
	// why, and which version the clusters keep.
	Source *sourceState `json:"source,omitempty"`
	// Ready is the status of the Ready condition: True, False or Unknown.
	Ready string `json:"ready"`
	// Reason and Message are the Ready condition's.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// UpToDate is false while the status still describes an older generation of the spec.
	UpToDate bool `json:"upToDate"`
	// Results totals the clusters' results.
	Results reportCounts `json:"results"`
	// Violations is results.fail + results.error: more than 0 makes the command exit 1.
	Violations int64 `json:"violations"`
	// Blocked totals the clusters' refused admissions.
	Blocked int64 `json:"blocked"`
	// Clusters is the declaration's state in each selected cluster, by name.
	Clusters []declarationCluster `json:"clusters"`
	// Exceptions are the active FleetPolicyExceptions from a FleetPolicy's or PolicySet's
	// policies (the first to end first, at most 10; MoreExceptions counts the rest).
	Exceptions     []activeException `json:"exceptions,omitempty"`
	MoreExceptions int               `json:"moreExceptions,omitempty"`
}

// sourceState is a PolicySet's SourceReady condition.
type sourceState struct {
	// Ready is True when the source was read, False while it cannot be.
	Ready   string `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// declarationCluster is a declaration's state in one cluster.
type declarationCluster struct {
	Name string `json:"name"`
	// Phase: Synced, DryRun, Failed, Conflict, Unsupported, NotEnforced (its engine serves the
	// kind but does not execute it: unprotected), LockHeld or Pending.
	Phase        string       `json:"phase"`
	Message      string       `json:"message,omitempty"`
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Actions counts what the last sync did (or would do, in dry-run).
	Actions actionTally `json:"actions"`
	// Results are the declaration's report results in the cluster; null before its agent reported.
	Results    *reportCounts `json:"results"`
	Violations int64         `json:"violations"`
	Blocked    int64         `json:"blocked"`
	// ReportTime is when the hub received the summary the results come from, by the hub's clock.
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// Stale is true when the cluster's agent missed three heartbeats.
	Stale bool `json:"stale"`
	// Revision is the version of a PolicySet the cluster last synced in full (its digest).
	Revision string `json:"revision,omitempty"`
	// Engines are the engines the cluster runs, as its agent reported them; null before it did
	// (or from an agent older than the field).
	Engines []string `json:"engines"`
}

// actionTally is a sync's action counts, every one always printed.
type actionTally struct {
	Created   int32 `json:"created"`
	Updated   int32 `json:"updated"`
	Unchanged int32 `json:"unchanged"`
	Deleted   int32 `json:"deleted"`
	Conflict  int32 `json:"conflict"`
	Failed    int32 `json:"failed"`
}

// String lists the non-zero counts, e.g. "created=1,unchanged=2"; "-" when all are zero.
func (a actionTally) String() string {
	var parts []string
	for _, c := range []struct {
		name string
		n    int32
	}{{"created", a.Created}, {"updated", a.Updated}, {"unchanged", a.Unchanged}, {"deleted", a.Deleted}, {"conflict", a.Conflict}, {"failed", a.Failed}} {
		if c.n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c.name, c.n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// declarationRef is one positional argument of `status`.
type declarationRef struct {
	kind, name string
}

// fleetDeclarationNames are the cluster-scoped declarations as the commands name them: the
// FleetPolicies (NAME) and PolicySets (pset/NAME) the user may list.
func fleetDeclarationNames(ctx context.Context, c client.Client) []string {
	var names []string
	fps := &policyhubv1.FleetPolicyList{}
	if c.List(ctx, fps) == nil {
		for _, fp := range fps.Items {
			names = append(names, fp.Name)
		}
	}
	sets := &policyhubv1.PolicySetList{}
	if c.List(ctx, sets) == nil {
		for _, ps := range sets.Items {
			names = append(names, "pset/"+ps.Name)
		}
	}
	return names
}

// parseDeclarationRef reads NAME (a FleetPolicy), or TYPE/NAME with TYPE one of FleetPolicy's,
// PolicySet's or ApplicationPolicy's names (fleetpolicy, fleetpolicies, fp, policyset,
// policysets, pset, applicationpolicy, applicationpolicies, ap; case-insensitive, optionally
// .policyhub.io).
func parseDeclarationRef(arg string) (declarationRef, error) {
	typ, name, found := strings.Cut(arg, "/")
	if !found {
		typ, name = "fleetpolicy", arg
	}
	if name == "" || strings.Contains(name, "/") {
		return declarationRef{}, usageError{fmt.Errorf("%q: give NAME (a FleetPolicy) or TYPE/NAME", arg)}
	}
	resource := strings.TrimSuffix(strings.ToLower(typ), ".policyhub.io")
	var shown []string
	for _, k := range policyhubv1.DeclarationKinds() {
		if !k.ShipsPolicies {
			continue // an exception shows with the declaration it exempts from
		}
		if resource == k.Singular || resource == k.Plural || resource == k.ShortName {
			return declarationRef{kind: k.Kind, name: name}, nil
		}
		shown = append(shown, fmt.Sprintf("%s (%s)", k.Singular, k.ShortName))
	}
	return declarationRef{}, usageError{fmt.Errorf("%q: unknown type %q: status shows %s and %s", arg, typ, strings.Join(shown[:len(shown)-1], ", "), shown[len(shown)-1])}
}

func newStatusCommand(o *options) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "status [FLEETPOLICY | TYPE/NAME ...]",
		Short: "Show the declarations' state per cluster: phase, sync actions, results, blocked admissions",
		Long: `Show each declaration's state in each of its clusters: the sync phase and message, what the last
sync did (created, updated, unchanged, deleted, conflict, failed), the policy report results
(fail, error) its agents reported, the admissions its policies refused (blocked), and how fresh
those are (REPORTED: how long ago the hub received the summary they come from; "-" before the
cluster's agent reported).

Without arguments: every FleetPolicy and PolicySet, and the ApplicationPolicies of the namespace
(-n, else the kubeconfig context's; -A for every namespace). Arguments name declarations: NAME is a
FleetPolicy, fp/NAME (fleetpolicy/NAME) a FleetPolicy, pset/NAME (policyset/NAME) a PolicySet,
ap/NAME (applicationpolicy/NAME) an ApplicationPolicy of the namespace. A name that does not exist
is an error.

Exit codes: 0 when no declaration shown has violations, 1 when any has (results fail + error > 0;
blocked admissions alone do not count), 2 on errors.

-o json|yaml prints {"declarations": [{"kind", "namespace", "name", "application", "mode", "engines",
"revision", "digest", "members" (a PolicySet's source version and member count), "source":
{"ready", "reason", "message"} (a PolicySet's SourceReady condition: False while its source cannot
be read, saying which version the clusters keep), "ready",
"reason", "message", "upToDate", "results": {"pass", "fail", "warn", "error", "skip"},
"violations", "blocked", "clusters": [{"name", "phase", "message", "lastSyncTime", "actions":
{"created", "updated", "unchanged", "deleted", "conflict", "failed"}, "results" (null before the
cluster's agent reported), "violations", "blocked", "reportTime", "stale", "revision" (the
PolicySet version the cluster runs), "engines" (the engines the cluster runs, as its agent
reported them)}], "exceptions": [{"namespace", "name", "member", "expiresAt",
"inForce", "exempted"}] (the active FleetPolicyExceptions from the declaration's policies, the first
to end first, at most 10), "moreExceptions"}]}. The table lists those exceptions under the clusters.

The table has a row per cluster, and rows for what no cluster's row says: CLUSTER <source> when a
PolicySet's source cannot be read (the clusters keep the version read last: the message names it),
and <all> when the declaration is not Ready for a reason of its own (its source, a rollout waiting
or stalled, a placement missing, places not granted...).

ENGINE names the engine that enforces what the declaration ships: Kyverno, Kubernetes (a
ValidatingAdmissionPolicy, enforced by the API server itself) or Gatekeeper (several for a
PolicySet of mixed members). A cluster whose agent reports it does not run that engine says so in
its message. A result kind an engine does not count is null in -o json, never 0: Gatekeeper's
audit counts violations only, so its pass, warn, error and skip are null.`,
		Example: `  # Every FleetPolicy, and the ApplicationPolicies of the current namespace
  kubectl policyhub status

  # One FleetPolicy
  kubectl policyhub status disallow-latest-tag

  # A PolicySet: which version each cluster runs, as JSON
  kubectl policyhub status pset/pss-baseline -o json

  # A FleetPolicy and an ApplicationPolicy of namespace shop, as JSON
  kubectl policyhub status disallow-latest-tag ap/shop-limits -n shop -o json

  # Every declaration, every namespace; fail a CI step on violations
  kubectl policyhub status -A || echo "violations found"`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return o.declarationNames(cmd.Context(), args), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := o.status(cmd.Context(), args, allNamespaces)
			if err != nil {
				return err
			}
			if err := o.printReport(report, func(w io.Writer) error {
				now := time.Now()
				printStatusTable(w, report, now)
				printStatusExceptions(w, report, now)
				return nil
			}); err != nil {
				return err
			}
			if len(report.Declarations) == 0 && o.output == "table" {
				fmt.Fprintln(o.streams.ErrOut, "No declarations found.")
			}
			for _, d := range report.Declarations {
				if d.Violations > 0 {
					return errFindings
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Show the ApplicationPolicies of every namespace.")
	return cmd
}

// declarationNames completes status's arguments: FleetPolicy names, pset/NAME and ap/NAME of the
// namespace.
func (o *options) declarationNames(ctx context.Context, done []string) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	names := fleetDeclarationNames(ctx, c)
	aps := &policyhubv1.ApplicationPolicyList{}
	if c.List(ctx, aps, client.InNamespace(o.namespace())) == nil {
		for _, ap := range aps.Items {
			names = append(names, "ap/"+ap.Name)
		}
	}
	return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(done, n) })
}

// status builds the report of the named declarations (see the command's help for the default).
func (o *options) status(ctx context.Context, args []string, allNamespaces bool) (*statusReport, error) {
	var refs []declarationRef
	for _, arg := range args {
		ref, err := parseDeclarationRef(arg)
		if err != nil {
			return nil, err
		}
		if ref.kind == kindApplicationPolicy && allNamespaces {
			return nil, usageError{fmt.Errorf("%s: an ApplicationPolicy is named within one namespace: use -n, not -A", arg)}
		}
		refs = append(refs, ref)
	}
	c, err := o.hubClient()
	if err != nil {
		return nil, err
	}
	ns := o.namespace()
	var fps []policyhubv1.FleetPolicy
	var sets []policyhubv1.PolicySet
	var aps []policyhubv1.ApplicationPolicy
	if len(refs) == 0 {
		fpList := &policyhubv1.FleetPolicyList{}
		if err := c.List(ctx, fpList); err != nil {
			return nil, fmt.Errorf("list FleetPolicies: %w", err)
		}
		fps = fpList.Items
		setList := &policyhubv1.PolicySetList{}
		// A hub from before PolicySets serves no such kind: it has none to show.
		if err := c.List(ctx, setList); err != nil && !isMissingCRD(err) {
			return nil, fmt.Errorf("list PolicySets: %w", err)
		}
		sets = setList.Items
		apList := &policyhubv1.ApplicationPolicyList{}
		var opts []client.ListOption
		if !allNamespaces {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(ctx, apList, opts...); err != nil {
			return nil, fmt.Errorf("list ApplicationPolicies: %w", err)
		}
		aps = apList.Items
	}
	seen := map[declarationRef]bool{}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		switch ref.kind {
		case kindFleetPolicy:
			fp := policyhubv1.FleetPolicy{}
			if err := c.Get(ctx, client.ObjectKey{Name: ref.name}, &fp); err != nil {
				return nil, notFound(err, fmt.Sprintf("FleetPolicy %q not found", ref.name))
			}
			fps = append(fps, fp)
		case kindPolicySet:
			ps := policyhubv1.PolicySet{}
			if err := c.Get(ctx, client.ObjectKey{Name: ref.name}, &ps); err != nil {
				return nil, notFound(err, fmt.Sprintf("PolicySet %q not found", ref.name))
			}
			sets = append(sets, ps)
		case kindApplicationPolicy:
			ap := policyhubv1.ApplicationPolicy{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.name}, &ap); err != nil {
				return nil, notFound(err, fmt.Sprintf("ApplicationPolicy %q not found in namespace %q", ref.name, ns))
			}
			aps = append(aps, ap)
		}
	}

	var active []policyhubv1.FleetPolicyException
	if len(fps)+len(sets) > 0 {
		if active, err = readActiveExceptions(ctx, c, ns); err != nil {
			return nil, err
		}
	}
	facts := readClusterFacts(ctx, c, len(fps)+len(sets)+len(aps))
	report := &statusReport{Declarations: []declarationStatus{}}
	slices.SortFunc(fps, func(a, b policyhubv1.FleetPolicy) int { return strings.Compare(a.Name, b.Name) })
	for i := range fps {
		fp := &fps[i]
		d := declarationStatus{Kind: kindFleetPolicy, Name: fp.Name, UpToDate: fp.Status.ObservedGeneration == fp.Generation,
			Engines: templateEngines(fp.Spec.Template.APIVersion)}
		if fp.Spec.Mode != nil {
			d.Mode = string(*fp.Spec.Mode)
		}
		clusters, err := clusterStates(ctx, c, fp, policyhubv1.KindFleetPolicy)
		if err != nil {
			return nil, err
		}
		d.fill(fp.Status.Conditions, clusters, facts)
		d.Exceptions, d.MoreExceptions = exceptionsFrom(active, policyhubv1.KindFleetPolicy, fp.Name)
		report.Declarations = append(report.Declarations, d)
	}
	slices.SortFunc(sets, func(a, b policyhubv1.PolicySet) int { return strings.Compare(a.Name, b.Name) })
	for i := range sets {
		ps := &sets[i]
		d := declarationStatus{Kind: kindPolicySet, Name: ps.Name, UpToDate: ps.Status.ObservedGeneration == ps.Generation, Members: ps.Status.Members.Total,
			Engines: memberEngines(ps.Status.Members.ByEngine)}
		if ps.Spec.Mode != nil {
			d.Mode = string(*ps.Spec.Mode)
		}
		if src := ps.Status.Source; src != nil {
			d.Revision, d.Digest = src.Revision, src.Digest
		}
		if c := meta.FindStatusCondition(ps.Status.Conditions, policyhubv1.ConditionSourceReady); c != nil {
			d.Source = &sourceState{Ready: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
		clusters, err := clusterStates(ctx, c, ps, policyhubv1.KindPolicySet)
		if err != nil {
			return nil, err
		}
		d.fill(ps.Status.Conditions, clusters, facts)
		d.Exceptions, d.MoreExceptions = exceptionsFrom(active, policyhubv1.KindPolicySet, ps.Name)
		report.Declarations = append(report.Declarations, d)
	}
	slices.SortFunc(aps, func(a, b policyhubv1.ApplicationPolicy) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range aps {
		ap := &aps[i]
		d := declarationStatus{Kind: kindApplicationPolicy, Namespace: ap.Namespace, Name: ap.Name, Application: ap.Spec.Application,
			Mode: string(ap.Spec.Mode), UpToDate: ap.Status.ObservedGeneration == ap.Generation,
			Engines: []string{string(policyhubv1.EngineKyverno)}} // its rules are Kyverno's
		clusters, err := clusterStates(ctx, c, ap, policyhubv1.KindApplicationPolicy)
		if err != nil {
			return nil, err
		}
		d.fill(ap.Status.Conditions, clusters, facts)
		report.Declarations = append(report.Declarations, d)
	}
	return report, nil
}

// notFound turns a NotFound of an object into msg; other errors stay as they are.
func notFound(err error, msg string) error {
	if apierrors.IsNotFound(err) && !isMissingCRD(err) {
		return fmt.Errorf("%s", msg)
	}
	return err
}

// clusterFacts are what the clusters' summaries say that the status shows: the engines each
// runs, and whether its Kyverno writes pass results (engine.kyverno.reportedResults).
type clusterFacts map[string]*policyhubv1.EngineInfo

// readClusterFacts reads the clusters' engine facts from their summaries, when there are
// declarations to show; none when the summaries may not be read (the status shows without them).
func readClusterFacts(ctx context.Context, c client.Client, declarations int) clusterFacts {
	out := clusterFacts{}
	if declarations == 0 {
		return out
	}
	summaries, err := clusterSummaries(ctx, c)
	if err != nil {
		return out
	}
	for cluster, s := range summaries {
		out[cluster] = &s.Spec.Engine
	}
	return out
}

// counts are a declaration's results c in cluster, the kinds one of its engines does not count
// there unknown (Gatekeeper's audit counts fail only; a Kyverno may write no pass results).
func (f clusterFacts) counts(cluster string, engines []string, c policyhubv1.ResultCounts) reportCounts {
	if len(engines) == 0 {
		engines = []string{string(policyhubv1.EngineKyverno)} // not known: as before engines were
	}
	out := toReportCounts(c)
	for _, kind := range resultKinds {
		for _, e := range engines {
			if !policyhubv1.PolicyEngine(e).ReportsResult(f[cluster], kind) {
				out.add(reportCounts{unknown: map[string]bool{kind: true}})
				break
			}
		}
	}
	return out
}

// engines are the engines the cluster's agent reported it runs; nil when unknown.
func (f clusterFacts) engines(cluster string) []string {
	info := f[cluster]
	if info == nil || info.Engines == nil {
		return nil
	}
	out := make([]string, 0, len(info.Engines))
	for _, e := range info.Engines {
		out = append(out, string(e))
	}
	return out
}

// templateEngines is the engine of a FleetPolicy's template, as a list.
func templateEngines(apiVersion string) []string {
	if e, ok := policyhubv1.EngineOfAPIVersion(apiVersion); ok {
		return []string{string(e)}
	}
	return []string{}
}

// memberEngines are the engines of a PolicySet's members, as its status counts them.
func memberEngines(counts []policyhubv1.EngineCount) []string {
	out := []string{}
	for _, c := range counts {
		if c.Count > 0 {
			out = append(out, string(c.Engine))
		}
	}
	return out
}

// fill sets the Ready condition's fields and the per-cluster state with their totals, with the
// clusters' engine facts (pass results unknown where an engine does not count them).
func (d *declarationStatus) fill(conditions []metav1.Condition, clusters []policyhubv1.ClusterStatus, facts clusterFacts) {
	d.Ready = string(metav1.ConditionUnknown)
	if ready := meta.FindStatusCondition(conditions, policyhubv1.ConditionReady); ready != nil {
		d.Ready, d.Reason, d.Message = string(ready.Status), ready.Reason, ready.Message
	}
	d.Clusters = []declarationCluster{}
	for _, s := range clusters {
		c := declarationCluster{
			Name: s.Name, Phase: string(s.Phase), Message: s.Message, LastSyncTime: s.LastSyncTime,
			Actions: actionTally{Created: s.Actions.Created, Updated: s.Actions.Updated, Unchanged: s.Actions.Unchanged,
				Deleted: s.Actions.Deleted, Conflict: s.Actions.Conflict, Failed: s.Actions.Failed},
			Blocked: s.Blocked, ReportTime: s.ReportTime, Stale: s.Stale, Revision: s.Revision, Engines: facts.engines(s.Name),
		}
		if s.Results != nil {
			r := facts.counts(s.Name, d.Engines, *s.Results)
			c.Results, c.Violations = &r, r.violations()
			d.Results.add(r)
		}
		d.Blocked = aggregate.AddCount(d.Blocked, c.Blocked)
		d.Clusters = append(d.Clusters, c)
	}
	slices.SortFunc(d.Clusters, func(a, b declarationCluster) int { return strings.Compare(a.Name, b.Name) })
	d.Violations = d.Results.violations()
}

// ref is Kind/name or Kind/namespace/name.
func (d *declarationStatus) ref() string {
	if d.Namespace == "" {
		return d.Kind + "/" + d.Name
	}
	return d.Kind + "/" + d.Namespace + "/" + d.Name
}

// printStatusTable prints a row per declaration and cluster; REPORTED is how long before now the
// hub received the summary the cluster's results come from.
func printStatusTable(w io.Writer, report *statusReport, now time.Time) {
	if len(report.Declarations) == 0 {
		return
	}
	tableRow(w, "DECLARATION", "CLUSTER", "ENGINE", "PHASE", "ACTIONS", "FAIL", "ERROR", "BLOCKED", "REPORTED", "MESSAGE")
	for _, d := range report.Declarations {
		engine := cmp.Or(strings.Join(d.Engines, ","), "-")
		if len(d.Clusters) == 0 {
			// No cluster to show: the declaration's own state says why (no cluster selected,
			// suspended, invalid, not reconciled yet).
			phase := d.Reason
			if phase == "" {
				phase = "Unknown"
			}
			msg := d.Message
			if msg == "" && !d.UpToDate {
				msg = "not reconciled yet"
			}
			tableRow(w, d.ref(), "<none>", engine, phase, "-", "-", "-", "-", "-", oneLine(msg))
			continue
		}
		// What the clusters' rows cannot say: the declaration's own state (its source, a
		// rollout waiting, a placement missing...), when it is why the declaration is not Ready.
		if src := d.Source; src != nil && src.Ready != string(metav1.ConditionTrue) && d.Reason != policyhubv1.ReasonSourceNotReady {
			tableRow(w, d.ref(), "<source>", engine, src.Reason, "-", "-", "-", "-", "-", oneLine(src.Message))
		}
		if d.Ready == string(metav1.ConditionFalse) && !slices.ContainsFunc(d.Clusters, func(c declarationCluster) bool { return c.Phase == d.Reason }) {
			tableRow(w, d.ref(), "<all>", engine, cmp.Or(d.Reason, "Unknown"), "-", "-", "-", "-", "-", oneLine(d.Message))
		}
		for _, c := range d.Clusters {
			fail, errs := "-", "-"
			if c.Results != nil {
				fail, errs = itoa(c.Results.Fail), itoa(c.Results.Error)
			}
			msg := c.Message
			if c.Stale {
				msg = strings.TrimSuffix("results are stale (the agent missed three heartbeats); "+msg, "; ")
			}
			if c.Engines != nil && !slices.ContainsFunc(d.Engines, func(e string) bool { return slices.Contains(c.Engines, e) }) {
				msg = strings.TrimSuffix(fmt.Sprintf("the cluster runs %s, not %s; %s", cmp.Or(strings.Join(c.Engines, ","), "no policy engine"), engine, msg), "; ")
			}
			reported := "-"
			if c.ReportTime != nil {
				reported = duration.HumanDuration(max(now.Sub(c.ReportTime.Time), 0))
			}
			tableRow(w, d.ref(), c.Name, engine, c.Phase, c.Actions.String(), fail, errs, itoa(c.Blocked), reported, oneLine(msg))
		}
	}
}
