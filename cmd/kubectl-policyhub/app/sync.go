package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

func init() { commands = append(commands, newSyncCommand) }

const (
	// syncConcurrency bounds the clusters planned at once.
	syncConcurrency = 8
	// syncProgressAbove: more clusters than this get a progress line on stderr.
	syncProgressAbove = 3
)

type syncOptions struct {
	*options
	dryRun        bool
	clusters      []string
	policies      []string
	allNamespaces bool
}

func newSyncCommand(o *options) *cobra.Command {
	so := &syncOptions{options: o}
	cmd := &cobra.Command{
		Use:   "sync --dry-run [--cluster C]... [--policy P]... [-n NS | -A]",
		Short: "Preview the hub's sync: per cluster the actions, a diff per changed object and Kyverno's admission errors; writes nothing",
		Long: `sync --dry-run runs the hub's own planner (the same code as policyhub-hub) from your machine,
through cluster-gateway, and prints what the hub's next sync would do in each cluster: the actions
(create, update, unchanged, delete, conflict), a unified diff per changed object, and the errors
Kyverno's admission (or the API server) returns for the objects it would refuse. Every request is
sent with dryRun=All: nothing is written, not even the clusters' sync Lease.

The declarations planned are every FleetPolicy and PolicySet (or those named with --policy:
NAME, and pset/NAME for a PolicySet) and the ApplicationPolicies of the namespace (-n, default the
context's; -A for every namespace). A PolicySet's source is read as the hub reads it: a version the
hub has not read yet (a new tag digest, a new commit) is planned, and a note says so, before the
hub applies it; where the source cannot be read from here, and for every Flux source (its
artifact is fetched by the hub only, from source-controller's storage), the version the hub keeps
is planned, with a note.
Suspended declarations and declarations the hub cannot dispatch (invalid placement or template)
are listed as notes, not planned. An ApplicationPolicy without spec.placement is placed by its
KubeVela Application's topology policies, as the hub does.

The hub syncs by itself: there is no sync without --dry-run.

Exit codes: 0 the plan is complete and nothing would be refused; 1 some planned object would be
refused (by Kyverno's admission or the API server); 2 usage or runtime error, including a cluster
that could not be planned (it is reported in its row, the other clusters are planned anyway).`,
		Example: `  # What would the hub change, everywhere?
  kubectl policyhub sync --dry-run

  # One FleetPolicy in two clusters, as JSON
  kubectl policyhub sync --dry-run --policy disallow-latest-tag --cluster prod-1 --cluster prod-2 -o json

  # What a new version of a PolicySet's source would change, per cluster
  kubectl policyhub sync --dry-run --policy pset/pss-baseline

  # The ApplicationPolicies of every namespace too
  kubectl policyhub sync --dry-run -A`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("sync takes no arguments (got %q): name declarations with --policy", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return so.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.BoolVar(&so.dryRun, "dry-run", false, "Plan and send every request with dryRun=All; required (the hub does the real syncs).")
	f.StringArrayVar(&so.clusters, "cluster", nil, "Plan only this cluster (repeatable); default every cluster a declaration places policies in.")
	f.StringArrayVar(&so.policies, "policy", nil, "Plan only the FleetPolicy or ApplicationPolicy of this name, or the PolicySet pset/NAME (repeatable); default every declaration.")
	f.BoolVarP(&so.allNamespaces, "all-namespaces", "A", false, "Plan the ApplicationPolicies of every namespace, not only -n's.")
	_ = cmd.RegisterFlagCompletionFunc("cluster", syncCompleteClusters(o))
	_ = cmd.RegisterFlagCompletionFunc("policy", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		hub, err := o.hubClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := &policyhubv1.FleetPolicyList{}
		if err := hub.List(cmd.Context(), list); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, fp := range list.Items {
			names = append(names, fp.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// syncCompleteClusters completes a --cluster flag with the inventory's cluster names.
func syncCompleteClusters(o *options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		hub, err := o.hubClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		inv, err := placement.ReadInventory(cmd.Context(), hub, o.secretNamespace)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return inventoryNames(inv), cobra.ShellCompDirectiveNoFileComp
	}
}

// The report: stable shapes for -o json|yaml.

type syncReport struct {
	// Clusters planned, by name.
	Clusters []syncClusterReport `json:"clusters"`
	// Notes are declarations not planned (suspended, invalid) and placement remarks.
	Notes []syncNote `json:"notes,omitempty"`
	// Totals add up every cluster's actions.
	Totals syncActions `json:"totals"`
}

type syncClusterReport struct {
	Name string `json:"name"`
	// Error says why the cluster could not be planned (unreachable, refused credentials).
	Error        string                  `json:"error,omitempty"`
	Declarations []syncDeclarationReport `json:"declarations"`
}

type syncDeclarationReport struct {
	// Declaration is Kind/name or Kind/namespace/name.
	Declaration string `json:"declaration"`
	// Phase is what the hub's status would say: DryRun, Failed, Conflict, Unsupported, NotEnforced.
	Phase   string      `json:"phase"`
	Message string      `json:"message,omitempty"`
	Actions syncActions `json:"actions"`
	// Changes are the planned changes (unchanged objects left out), each with its diff; a
	// refused one has action Failed and the admission error in message.
	Changes []policyhubv1.PlannedChange `json:"changes,omitempty"`
	// ChangesNotShown counts the changes beyond the planner's limit per declaration and cluster.
	ChangesNotShown int32 `json:"changesNotShown,omitempty"`
}

type syncActions struct {
	Created   int32 `json:"created"`
	Updated   int32 `json:"updated"`
	Unchanged int32 `json:"unchanged"`
	Deleted   int32 `json:"deleted"`
	Conflict  int32 `json:"conflict"`
	// Failed counts the objects that would be refused.
	Failed int32 `json:"failed"`
}

func (a *syncActions) add(b syncActions) {
	a.Created += b.Created
	a.Updated += b.Updated
	a.Unchanged += b.Unchanged
	a.Deleted += b.Deleted
	a.Conflict += b.Conflict
	a.Failed += b.Failed
}

type syncNote struct {
	Declaration string `json:"declaration"`
	Message     string `json:"message"`
}

// syncDeclaration is one declaration to plan: what it wants per cluster, and the clusters it is
// leaving (synced to before, no longer selected: the hub prunes it there, with prune on).
type syncDeclaration struct {
	source  string
	objects map[string][]*unstructured.Unstructured
	leaving []string
	prune   bool
}

func (so *syncOptions) run(ctx context.Context) error {
	if !so.dryRun {
		return usageError{errors.New("the hub syncs; run `sync --dry-run` to preview")}
	}
	hubCfg, err := so.hubConfig()
	if err != nil {
		return err
	}
	hub, err := so.hubClient()
	if err != nil {
		return err
	}
	if err := so.resolveHubID(ctx, hub); err != nil {
		return err
	}
	inv, err := placement.ReadInventory(ctx, hub, so.secretNamespace)
	if err != nil {
		return fmt.Errorf("read the cluster inventory: %w", err)
	}
	for _, c := range so.clusters {
		if err := knownCluster(inv, c); err != nil {
			return err
		}
	}
	decls, notes, err := so.declarations(ctx, hub, inv)
	if err != nil {
		return err
	}
	clusters, jobs := syncJobs(decls, so.clusters)

	syncer, err := work.NewSyncer(work.Options{HubID: so.hubID, Lock: work.LockOptions{Identity: "kubectl-policyhub/" + syncUser()}})
	if err != nil {
		return err
	}
	defer syncer.Close()
	report := syncPlan(ctx, syncer, hubCfg, clusters, jobs, so.streams.ErrOut)
	report.Notes = notes
	if err := writeReport(so.streams.Out, so.output, report, func(w io.Writer) error { syncWriteTable(w, report); return nil }); err != nil {
		return err
	}
	return syncOutcome(report)
}

// declarations reads the declarations to plan from the hub and places and renders them with the
// hub's own code; the ones the hub would not sync become notes.
func (so *syncOptions) declarations(ctx context.Context, hub client.Client, inv placement.Inventory) ([]syncDeclaration, []syncNote, error) {
	wanted := map[string]bool{}
	for _, p := range so.policies {
		wanted[p] = false
	}
	pick := func(name string) bool {
		if len(so.policies) == 0 {
			return true
		}
		if _, ok := wanted[name]; ok {
			wanted[name] = true
			return true
		}
		return false
	}
	var decls []syncDeclaration
	var notes []syncNote
	note := func(source, format string, args ...any) {
		notes = append(notes, syncNote{Declaration: source, Message: fmt.Sprintf(format, args...)})
	}

	fleet := &policyhubv1.FleetPolicyList{}
	if err := hub.List(ctx, fleet); err != nil {
		return nil, nil, fmt.Errorf("list FleetPolicies: %w", err)
	}
	for i := range fleet.Items {
		fp := &fleet.Items[i]
		if !pick(fp.Name) {
			continue
		}
		source := render.FleetPolicyOwner(so.hubID, fp.Name).Source()
		clusters, err := clusterStates(ctx, hub, fp, policyhubv1.KindFleetPolicy)
		if err != nil {
			return nil, nil, err
		}
		d, ok, err := syncDeclarationOf(source, fp.DeletionTimestamp != nil, fp.Spec.Suspend, fp.Spec.Prune, clusters, note,
			func() (*render.Targets, error) {
				// As the hub syncs it: a rollout gives each cluster its wave's version and mode.
				t, _, err := declare.FleetPolicyTargets(so.hubID, fp, inv)
				if err != nil {
					return nil, err
				}
				// As the hub does: a namespaced CEL policy marked with the exceptions in force.
				return t, declare.MarkExceptionsInForce(ctx, hub, policyhubv1.KindFleetPolicy, fp.Name, declare.FleetPolicyExceptedRef(fp), t)
			})
		if err != nil {
			return nil, nil, err
		}
		if ok {
			decls = append(decls, d)
		}
	}

	sets, err := so.setDeclarations(ctx, hub, inv, pick, note)
	if err != nil {
		return nil, nil, err
	}
	decls = append(decls, sets...)

	namespace := so.namespace()
	opts := []client.ListOption{client.InNamespace(namespace)}
	if so.allNamespaces {
		opts = nil
	}
	apps := &policyhubv1.ApplicationPolicyList{}
	if err := hub.List(ctx, apps, opts...); err != nil && !meta.IsNoMatchError(err) && !isMissingCRD(err) {
		return nil, nil, fmt.Errorf("list ApplicationPolicies: %w", err)
	}
	for i := range apps.Items {
		ap := &apps.Items[i]
		if !pick(ap.Name) {
			continue
		}
		source := render.ApplicationPolicyOwner(so.hubID, ap.Namespace, ap.Name).Source()
		clusters, err := clusterStates(ctx, hub, ap, policyhubv1.KindApplicationPolicy)
		if err != nil {
			return nil, nil, err
		}
		d, ok, err := syncDeclarationOf(source, ap.DeletionTimestamp != nil, ap.Spec.Suspend, ap.Spec.Prune, clusters, note,
			func() (*render.Targets, error) {
				var app *unstructured.Unstructured
				if ap.Spec.Placement == nil {
					var err error
					if app, err = declare.KubeVelaApplication(ctx, hub, ap); err != nil {
						return nil, err
					}
				}
				grants, err := placement.ReadGrants(ctx, hub, ap.Namespace)
				if err != nil {
					return nil, err
				}
				return declare.ApplicationPolicyTargets(so.hubID, ap, app, inv, grants)
			})
		if err != nil {
			return nil, nil, err
		}
		if ok {
			decls = append(decls, d)
		}
	}

	var unknown []string
	for name, found := range wanted {
		if !found {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		where := "in namespace " + namespace
		if so.allNamespaces {
			where = "in any namespace"
		}
		return nil, nil, fmt.Errorf("no FleetPolicy, nor ApplicationPolicy %s, is named %s (name a PolicySet pset/NAME)", where, strings.Join(unknown, ", "))
	}
	sort.Slice(decls, func(i, j int) bool { return decls[i].source < decls[j].source })
	sort.Slice(notes, func(i, j int) bool { return notes[i].Declaration < notes[j].Declaration })
	return decls, notes, nil
}

// syncDeclarationOf decides, with the hub's own hub/declare, what a declaration wants: nothing for a
// suspended one (a note), a prune everywhere it was for one being deleted, else its targets.
// A declaration the hub cannot dispatch is a note. ok is false when there is nothing to plan; an
// error is one reading what the declaration needs (its KubeVela Application).
func syncDeclarationOf(source string, deleting, suspended bool, prunePtr *bool, status []policyhubv1.ClusterStatus,
	note func(source, format string, args ...any), targets func() (*render.Targets, error)) (d syncDeclaration, ok bool, err error) {
	prune := declare.Prune(prunePtr)
	d = syncDeclaration{source: source, prune: prune, objects: map[string][]*unstructured.Unstructured{}}
	switch lifecycle, why := declare.LifecycleOf(deleting, suspended, prune); lifecycle {
	case declare.Keep:
		note(source, "%s; nothing planned", why)
		return d, false, nil
	case declare.PruneAll:
		note(source, "%s", why)
		d.leaving = declare.Leaving(status, nil)
		return d, true, nil
	}
	t, err := targets()
	if ie, isInvalid := render.AsInvalid(err); isInvalid {
		note(source, "not dispatched by the hub (%s): %v", ie.Reason, ie.Err)
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("%s: %w", source, err)
	}
	d.objects = t.Objects
	d.leaving = declare.Leaving(status, t.Objects)
	if len(t.Unknown) > 0 {
		note(source, "its placement names clusters that are not in the inventory: %s", strings.Join(t.Unknown, ", "))
	}
	return d, true, nil
}

// syncJobs groups the declarations by cluster, as the hub's sync of one cluster sees them: every
// declaration placed there, and a prune of those no longer placed where they were. only, when set,
// restricts the clusters (and every one of them is reported, planned or not).
func syncJobs(decls []syncDeclaration, only []string) ([]string, map[string][]work.Declaration) {
	jobs := map[string][]work.Declaration{}
	for _, d := range decls {
		for cluster, objs := range d.objects {
			jobs[cluster] = append(jobs[cluster], work.Declaration{Source: d.source, Objects: objs, DryRun: true, Prune: d.prune})
		}
		if !d.prune {
			continue
		}
		for _, cluster := range d.leaving {
			jobs[cluster] = append(jobs[cluster], work.Declaration{Source: d.source, DryRun: true, Prune: true})
		}
	}
	var clusters []string
	if len(only) > 0 {
		for _, c := range only {
			if !slices.Contains(clusters, c) {
				clusters = append(clusters, c)
			}
		}
		for c := range jobs {
			if !slices.Contains(clusters, c) {
				delete(jobs, c)
			}
		}
	} else {
		for c := range jobs {
			clusters = append(clusters, c)
		}
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		sort.SliceStable(jobs[c], func(i, j int) bool { return jobs[c][i].Source < jobs[c][j].Source })
	}
	return clusters, jobs
}

// syncPlan dry-runs every cluster's declarations, syncConcurrency clusters at a time; progress
// goes to progress (stderr) when there are more than a few clusters.
func syncPlan(ctx context.Context, syncer *work.Syncer, hubCfg *rest.Config, clusters []string, jobs map[string][]work.Declaration, progress io.Writer) *syncReport {
	// The planner logs one line per cluster for the hub's operators; a CLI user has the report.
	ctx = ctrllog.IntoContext(ctx, ctrllog.Log.WithSink(ctrllog.NullLogSink{}))
	report := &syncReport{Clusters: make([]syncClusterReport, len(clusters))}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		sem  = make(chan struct{}, syncConcurrency)
	)
	for i, name := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			report.Clusters[i] = syncPlanCluster(ctx, syncer, hubCfg, name, jobs[name])
			if len(clusters) > syncProgressAbove {
				mu.Lock()
				done++
				fmt.Fprintf(progress, "planned %d/%d clusters\n", done, len(clusters))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, c := range report.Clusters {
		for _, d := range c.Declarations {
			report.Totals.add(d.Actions)
		}
	}
	return report
}

func syncPlanCluster(ctx context.Context, syncer *work.Syncer, hubCfg *rest.Config, name string, decls []work.Declaration) syncClusterReport {
	out := syncClusterReport{Name: name, Declarations: []syncDeclarationReport{}}
	if len(decls) == 0 {
		return out
	}
	cfg, err := gateway.ClusterConfig(hubCfg, name)
	if err != nil {
		out.Error = err.Error()
		for _, d := range decls {
			out.Declarations = append(out.Declarations, syncDeclarationReport{Declaration: d.Source, Phase: string(policyhubv1.ClusterPhaseFailed), Message: err.Error()})
		}
		return out
	}
	return syncClusterFrom(syncer.Sync(ctx, work.Cluster{Name: name, Config: cfg}, decls))
}

// syncClusterFrom turns the planner's result into the report's shape.
func syncClusterFrom(res *work.ClusterResult) syncClusterReport {
	out := syncClusterReport{Name: res.Cluster, Declarations: []syncDeclarationReport{}}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	for _, d := range res.Declarations {
		a := d.Actions
		out.Declarations = append(out.Declarations, syncDeclarationReport{
			Declaration: d.Source, Phase: string(d.Phase), Message: d.Message,
			Actions: syncActions{Created: a.Created, Updated: a.Updated, Unchanged: a.Unchanged, Deleted: a.Deleted, Conflict: a.Conflict, Failed: a.Failed},
			Changes: d.Plan, ChangesNotShown: d.PlanTruncated,
		})
	}
	return out
}

// syncOutcome is the exit: 2 when a cluster could not be planned, 1 when an object would be
// refused, else 0.
func syncOutcome(r *syncReport) error {
	var failed []string
	for _, c := range r.Clusters {
		if c.Error != "" {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d clusters could not be planned (%s); see the report", len(failed), len(r.Clusters), strings.Join(failed, ", "))
	}
	if r.Totals.Failed > 0 {
		return errFindings
	}
	return nil
}

// knownCluster fails for a cluster the inventory lacks, naming the ones it has (every command
// that takes a cluster words it so).
func knownCluster(inv placement.Inventory, name string) error {
	names := inventoryNames(inv)
	if slices.Contains(names, name) {
		return nil
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "none"
	}
	return fmt.Errorf("cluster %s is not in the inventory (clusters: %s)", name, list)
}

func inventoryNames(inv placement.Inventory) []string {
	names := make([]string, 0, len(inv.Clusters))
	for _, c := range inv.Clusters {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

// syncUser names the person running the CLI, for the sync Lease identity.
func syncUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// Printing.

// syncColumns pads rows into aligned columns (two spaces apart), each line prefixed by indent.
// Cells are made one line and terminal-safe (cellText) before they are measured.
func syncColumns(indent string, rows [][]string) []string {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			row[i] = cellText(cell)
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(row[i]))
		}
	}
	lines := make([]string, 0, len(rows))
	for _, row := range rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-len(cell)+2))
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return lines
}

// syncIndent indents every line of a message (blank lines dropped, trailing spaces trimmed,
// each line terminal-safe).
func syncIndent(w io.Writer, indent, text string) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			continue
		}
		fmt.Fprintf(w, "%s%s\n", indent, cellText(line))
	}
}

// syncIndentDiff indents every line of a unified diff, keeping its blank context lines.
func syncIndentDiff(w io.Writer, indent, diff string) {
	// A diff from nothing ends with an empty context line: no need to show it.
	for _, line := range strings.Split(strings.TrimRight(diff, " \n"), "\n") {
		if strings.TrimSpace(line) == "" {
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "%s%s\n", indent, cellText(strings.TrimRight(line, " \t\r")))
	}
}

func syncWriteTable(w io.Writer, r *syncReport) {
	if len(r.Clusters) == 0 {
		fmt.Fprintln(w, "No declaration places anything in the selected clusters.")
	}
	for i, c := range r.Clusters {
		if i > 0 {
			fmt.Fprintln(w)
		}
		header := "CLUSTER " + cellText(c.Name)
		if c.Error != "" {
			header += " — not planned: " + cellText(oneLine(c.Error))
		}
		fmt.Fprintln(w, header)
		if len(c.Declarations) == 0 {
			fmt.Fprintln(w, "  no selected declaration places anything here")
			continue
		}
		rows := [][]string{{"DECLARATION", "PHASE", "CREATED", "UPDATED", "UNCHANGED", "DELETED", "CONFLICT", "FAILED"}}
		for _, d := range c.Declarations {
			a := d.Actions
			rows = append(rows, []string{d.Declaration, d.Phase, syncItoa(a.Created), syncItoa(a.Updated), syncItoa(a.Unchanged), syncItoa(a.Deleted), syncItoa(a.Conflict), syncItoa(a.Failed)})
		}
		for _, line := range syncColumns("  ", rows) {
			fmt.Fprintln(w, line)
		}
		for _, d := range c.Declarations {
			// The per-declaration message when it says more than the counts and the cluster's error.
			if d.Phase != string(policyhubv1.ClusterPhaseDryRun) && d.Message != "" && d.Message != c.Error && len(d.Changes) == 0 {
				fmt.Fprintf(w, "  %s: %s: %s\n", cellText(d.Declaration), cellText(d.Phase), cellText(oneLine(d.Message)))
			}
			for _, ch := range d.Changes {
				fmt.Fprintf(w, "  %s: %s %s %s\n", cellText(d.Declaration), cellText(ch.Action), cellText(ch.APIVersion+" "+ch.Kind), cellText(syncObjectName(ch.Namespace, ch.Name)))
				if ch.Message != "" {
					syncIndent(w, "      ", ch.Message)
				}
				if ch.Diff != "" {
					syncIndentDiff(w, "      ", ch.Diff)
				}
			}
			if d.ChangesNotShown > 0 {
				fmt.Fprintf(w, "  %s: %d more changes not shown (the planner keeps %d per declaration and cluster)\n", cellText(d.Declaration), d.ChangesNotShown, len(d.Changes))
			}
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s: %s\n", cellText(n.Declaration), cellText(oneLine(n.Message)))
	}
	t := r.Totals
	notPlanned := ""
	if n := syncNotPlanned(r); n > 0 {
		notPlanned = fmt.Sprintf(" (%d could not be planned)", n)
	}
	fmt.Fprintf(w, "\n%s%s: would create %d, update %d, delete %d; %d unchanged, %d conflicts, %d refused. Dry-run: nothing was written.\n",
		syncPlural(len(r.Clusters), "cluster"), notPlanned, t.Created, t.Updated, t.Deleted, t.Unchanged, t.Conflict, t.Failed)
}

func syncObjectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func syncNotPlanned(r *syncReport) int {
	n := 0
	for _, c := range r.Clusters {
		if c.Error != "" {
			n++
		}
	}
	return n
}

// syncPlural is "1 cluster", "2 clusters".
func syncPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func syncItoa(n int32) string { return strconv.FormatInt(int64(n), 10) }
