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

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
)

func init() { commands = append(commands, newInventoryCommand) }

// inventoryReport is the -o json|yaml output of `inventory`.
type inventoryReport struct {
	// Clusters are by name.
	Clusters []inventoryCluster `json:"clusters"`
	// Total sums the clusters' legacy objects (those whose agents reported an inventory).
	Total legacyTotals `json:"total"`
	// UpgradeBlocked counts the clusters that would fail Kyverno 1.20's upgrade gate; Unknown
	// those whose agent reported no inventory.
	UpgradeBlocked int `json:"upgradeBlocked"`
	Unknown        int `json:"unknown"`
}

// legacyTotals count legacy objects by owner.
type legacyTotals struct {
	LegacyObjects int64 `json:"legacyObjects"`
	Policyhub     int64 `json:"policyhub"`
	Other         int64 `json:"other"`
}

// inventoryCluster is one cluster's inventory of Kyverno legacy objects.
type inventoryCluster struct {
	Name string `json:"name"`
	// KyvernoVersion is what the agent read of Kyverno's version ("" when unknown).
	KyvernoVersion string `json:"kyvernoVersion"`
	// EnforcesLegacy: yes (before 1.20), no (from 1.20), unknown.
	EnforcesLegacy string `json:"enforcesLegacy"`
	// Known is true when the cluster's agent reported an inventory; the counts are 0 otherwise.
	Known bool `json:"known"`
	// Stale is true when the agent missed three heartbeats: the inventory may be out of date.
	Stale bool `json:"stale"`
	legacyTotals
	// Counts are by kind and owner.
	Counts []legacyCount `json:"counts"`
	// Objects are those the agent named (at most 50, those not owned by policyhub first);
	// Unnamed how many more the counts hold.
	Objects []legacyObject `json:"objects"`
	Unnamed int64          `json:"unnamed"`
	// UpgradeBlocked is true when Kyverno 1.20's Helm upgrade would refuse the cluster (any
	// legacy object); Reason says why, or why it cannot be told.
	UpgradeBlocked bool   `json:"upgradeBlocked"`
	Reason         string `json:"reason"`
}

type legacyCount struct {
	Kind  string `json:"kind"`
	Owner string `json:"owner"`
	Count int64  `json:"count"`
}

type legacyObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Owner     string `json:"owner"`
}

func newInventoryCommand(o *options) *cobra.Command {
	var only []string
	cmd := &cobra.Command{
		Use:   "inventory [--cluster NAME]...",
		Short: "List each cluster's Kyverno legacy objects and which clusters would fail Kyverno 1.20's upgrade",
		Long: `List, per cluster, Kyverno's legacy objects (kyverno.io ClusterPolicy, Policy,
ClusterCleanupPolicy, CleanupPolicy and PolicyException, owned by policyhub or not): Kyverno 1.20
keeps them served but no longer enforces them, denies every create and update of them, and its Helm
chart refuses to upgrade while any exists. For each cluster: Kyverno's version and whether it still
enforces the legacy kinds, the counts by kind and owner (policyhub: the object carries policyhub's
managed-by label; other: anything else), the objects its agent named (at most 50, those not owned by
policyhub first), and whether the cluster would fail Kyverno 1.20's upgrade gate and why; then a
fleet total.

The inventory is read from the clusters' PolicyReportSummaries on the hub, as their agents report
it: the command sends no request to the managed clusters. A cluster whose agent reported no
inventory (none yet, or an older agent) is "unknown", never counted as clean.

--cluster (repeatable, or comma separated) restricts the list to those clusters; an unknown name is
an error.

Exit codes: 0 when every listed cluster has no legacy object, 1 when any would fail Kyverno 1.20's
upgrade gate or is unknown, 2 on errors.

-o json|yaml prints {"clusters": [{"name", "kyvernoVersion", "enforcesLegacy", "known", "stale",
"legacyObjects", "policyhub", "other", "counts": [{"kind", "owner", "count"}], "objects": [{"kind",
"namespace", "name", "owner"}], "unnamed", "upgradeBlocked", "reason"}], "total": {"legacyObjects",
"policyhub", "other"}, "upgradeBlocked", "unknown"}.`,
		Example: `  # Every cluster's legacy objects
  kubectl policyhub inventory

  # Two clusters, as JSON
  kubectl policyhub inventory --cluster cluster-1,cluster-2 -o json

  # The clusters that would fail Kyverno 1.20's upgrade, and why
  kubectl policyhub inventory -o json | jq -r '.clusters[] | select(.upgradeBlocked) | "\(.name): \(.reason)"'

  # Gate a Kyverno upgrade pipeline on a clean inventory
  kubectl policyhub inventory --cluster cluster-1 >/dev/null && helm upgrade ...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("inventory takes no arguments (name clusters with --cluster), got %q", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, err := o.inventory(cmd.Context(), only, time.Now())
			if err != nil {
				return err
			}
			if err := o.printReport(report, func(w io.Writer) error {
				printInventoryTable(w, report)
				return nil
			}); err != nil {
				return err
			}
			if len(report.Clusters) == 0 && o.output == "table" {
				fmt.Fprintf(o.streams.ErrOut, "No clusters found: no cluster-gateway credential Secret in %s, no OCM ManagedCluster and no PolicyReportSummary.\n", o.secretNamespace)
			}
			if report.UpgradeBlocked > 0 || report.Unknown > 0 {
				return errFindings
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&only, "cluster", nil, "only these clusters (repeatable, or comma separated)")
	_ = cmd.RegisterFlagCompletionFunc("cluster", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		names, _ := o.clusterNames(cmd.Context())
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// inventory builds the report from the hub alone: the summaries and the hub's inventory of clusters.
func (o *options) inventory(ctx context.Context, only []string, now time.Time) (*inventoryReport, error) {
	c, err := o.hubClient()
	if err != nil {
		return nil, err
	}
	summaries, live, inv, err := o.hubFleet(ctx, c, now)
	if err != nil {
		return nil, err
	}
	clusters := map[string]map[string]string{}
	for _, cl := range inv.Clusters {
		clusters[cl.Name] = cl.Labels
	}
	for _, name := range only {
		if _, ok := clusters[name]; ok {
			continue
		}
		if _, ok := summaries[name]; !ok {
			return nil, fmt.Errorf("--cluster %s: %w", name, knownCluster(inv, name))
		}
	}
	list := make([]*policyhubv1.PolicyReportSummary, 0, len(summaries))
	for _, s := range summaries {
		list = append(list, s)
	}
	built := pages.BuildInventory(list, clusters, only, func(s *policyhubv1.PolicyReportSummary) bool { return live.stale(s, now) })
	return toInventoryReport(built), nil
}

// toInventoryReport is the report of the inventory the web view's page shows: its lists [] in
// JSON when empty.
func toInventoryReport(in *pages.Inventory) *inventoryReport {
	report := &inventoryReport{Clusters: []inventoryCluster{}, UpgradeBlocked: in.Blocked, Unknown: in.Unknown,
		Total: legacyTotals{LegacyObjects: in.Total.Total, Policyhub: in.Total.Policyhub, Other: in.Total.Other}}
	for _, c := range in.Clusters {
		r := inventoryCluster{Name: c.Name, KyvernoVersion: c.KyvernoVersion, EnforcesLegacy: c.EnforcesLegacy, Known: c.Known, Stale: c.Stale,
			legacyTotals: legacyTotals{LegacyObjects: c.Total, Policyhub: c.Policyhub, Other: c.Other},
			Counts:       []legacyCount{}, Objects: []legacyObject{}, Unnamed: c.Unnamed, UpgradeBlocked: c.UpgradeBlocked, Reason: c.Why}
		for _, n := range c.Counts {
			r.Counts = append(r.Counts, legacyCount{Kind: n.Kind, Owner: string(n.Owner), Count: max(n.Count, 0)})
		}
		for _, obj := range c.Objects {
			r.Objects = append(r.Objects, legacyObject{Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, Owner: string(obj.Owner)})
		}
		report.Clusters = append(report.Clusters, r)
	}
	return report
}

// printInventoryTable prints the clusters (one row each, and a fleet total), then the objects
// the agents named.
func printInventoryTable(w io.Writer, r *inventoryReport) {
	if len(r.Clusters) == 0 {
		return
	}
	tableRow(w, "CLUSTER", "KYVERNO", "ENFORCES-LEGACY", "LEGACY", "POLICYHUB", "OTHER", "BY-KIND", "KYVERNO-1.20-UPGRADE")
	for _, c := range r.Clusters {
		name := c.Name
		if c.Stale {
			name += " (stale)"
		}
		legacy, owned, other, byKind, gate := "<unknown>", "<unknown>", "<unknown>", "<unknown>", "unknown"
		if c.Known {
			legacy, owned, other, gate = itoa(c.LegacyObjects), itoa(c.Policyhub), itoa(c.Other), "passes"
			byKind = legacyByKind(c.Counts)
			if c.UpgradeBlocked {
				gate = "would-fail"
			}
		}
		tableRow(w, name, cmp.Or(c.KyvernoVersion, "<unknown>"), c.EnforcesLegacy, legacy, owned, other, byKind, gate)
	}
	tableRow(w, "TOTAL", "", "", itoa(r.Total.LegacyObjects), itoa(r.Total.Policyhub), itoa(r.Total.Other), "",
		fmt.Sprintf("%d-would-fail,%d-unknown", r.UpgradeBlocked, r.Unknown))

	var failing []inventoryCluster
	for _, c := range r.Clusters {
		if c.UpgradeBlocked || !c.Known {
			failing = append(failing, c)
		}
	}
	if len(failing) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Why:")
		for _, c := range failing {
			fmt.Fprintf(w, "  %s: %s\n", cellText(c.Name), cellText(c.Reason))
		}
	}
	if !slices.ContainsFunc(r.Clusters, func(c inventoryCluster) bool { return len(c.Objects) > 0 }) {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Legacy objects (at most 50 named per cluster, those not owned by policyhub first):")
	tableRow(w, "CLUSTER", "KIND", "NAMESPACE", "NAME", "OWNER")
	for _, c := range r.Clusters {
		for _, obj := range c.Objects {
			tableRow(w, c.Name, obj.Kind, obj.Namespace, obj.Name, obj.Owner)
		}
		if len(c.Objects) > 0 && c.Unnamed > 0 {
			tableRow(w, c.Name, fmt.Sprintf("(%d-more)", c.Unnamed), "", "", "")
		}
	}
}

// legacyByKind is a cluster's counts as one cell: Kind=N(owner) pairs, "<none>" when none.
func legacyByKind(counts []legacyCount) string {
	var parts []string
	for _, n := range counts {
		if n.Count > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d(%s)", n.Kind, n.Count, n.Owner))
		}
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ",")
}
