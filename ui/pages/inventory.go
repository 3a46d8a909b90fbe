package pages

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// InventoryURL is the fleet inventory of Kyverno's legacy objects.
const InventoryURL = "/inventory"

// Inventory is the fleet's inventory of Kyverno legacy objects, from the clusters' summaries
// alone (the hub asks no cluster for it): per cluster the counts by kind and owner, the objects
// the agent named, and whether the cluster would fail Kyverno 1.20's upgrade gate.
type Inventory struct {
	Clusters []InventoryCluster
	// Total sums the clusters' inventories.
	Total LegacyTotals
	// Blocked counts the clusters that would fail Kyverno 1.20's upgrade gate (legacy objects
	// present); Unknown those whose agent sent no inventory.
	Blocked, Unknown int
}

// LegacyTotals are legacy objects counted by owner.
type LegacyTotals struct {
	Total, Policyhub, Other int64
}

// InventoryCluster is one cluster's inventory.
type InventoryCluster struct {
	Name, URL string
	// Reported: the cluster's agent sent a summary; Known: with an inventory in it.
	Reported, Known bool
	Stale           bool
	// KyvernoVersion is what the agent read of Kyverno's version ("" when unknown);
	// EnforcesLegacy says whether that version still executes the legacy kinds: yes, no or unknown.
	KyvernoVersion, EnforcesLegacy string
	LegacyTotals
	// Counts are by kind and owner, sorted; Objects those the agent named (at most
	// policyhubv1.MaxLegacyNames), Unnamed how many more the counts hold.
	Counts  []policyhubv1.LegacyCount
	Objects []policyhubv1.LegacyObject
	Unnamed int64
	// UpgradeBlocked: Kyverno 1.20's Helm upgrade would refuse this cluster; Why says why (or
	// why it cannot be told).
	UpgradeBlocked bool
	Why            string
}

// BuildInventory computes the inventory of the clusters in the hub's inventory (labels by name)
// and of those with a summary; only, when not empty, restricts it to those named. stale says
// whether a summary's agent is silent.
func BuildInventory(summaries []*policyhubv1.PolicyReportSummary, clusters map[string]map[string]string, only []string,
	stale func(*policyhubv1.PolicyReportSummary) bool) *Inventory {
	byCluster := make(map[string]*policyhubv1.PolicyReportSummary, len(summaries))
	for _, s := range summaries {
		byCluster[s.Namespace] = s
	}
	names := map[string]bool{}
	for name := range clusters {
		names[name] = true
	}
	for name := range byCluster {
		names[name] = true
	}
	if len(only) > 0 {
		names = map[string]bool{}
		for _, name := range only {
			names[name] = true
		}
	}
	inv := &Inventory{}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		c := inventoryCluster(name, byCluster[name], stale)
		inv.Total.add(c.LegacyTotals)
		switch {
		case !c.Known:
			inv.Unknown++
		case c.UpgradeBlocked:
			inv.Blocked++
		}
		inv.Clusters = append(inv.Clusters, c)
	}
	return inv
}

// InventoryOf is a cluster's inventory from its summary (nil: none).
func InventoryOf(name string, s *policyhubv1.PolicyReportSummary, stale func(*policyhubv1.PolicyReportSummary) bool) InventoryCluster {
	return inventoryCluster(name, s, stale)
}

func inventoryCluster(name string, s *policyhubv1.PolicyReportSummary, stale func(*policyhubv1.PolicyReportSummary) bool) InventoryCluster {
	c := InventoryCluster{Name: name, URL: ClusterURL(name), EnforcesLegacy: "unknown"}
	if s == nil {
		c.Why = "no summary from the cluster's agent: its legacy objects are not known"
		return c
	}
	c.Reported, c.Stale = true, stale(s)
	if k := s.Spec.Engine.Kyverno; k != nil {
		c.KyvernoVersion = k.Version
		if enforces, known := policyhubv1.KyvernoEnforcesLegacy(k.Version); known {
			c.EnforcesLegacy = map[bool]string{true: "yes", false: "no"}[enforces]
		}
	}
	legacy := s.Spec.Engine.Legacy
	if legacy == nil {
		c.Why = "the cluster's agent reports no inventory of legacy objects (an older agent, or it could not read them)"
		return c
	}
	c.Known = true
	c.Total, c.Policyhub, c.Other = legacy.Total(), legacy.Owned(policyhubv1.LegacyOwnerPolicyhub), legacy.Owned(policyhubv1.LegacyOwnerOther)
	c.Counts = slices.Clone(legacy.Counts)
	slices.SortFunc(c.Counts, func(a, b policyhubv1.LegacyCount) int {
		return cmp.Or(cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)), strings.Compare(string(a.Owner), string(b.Owner)))
	})
	c.Objects = slices.Clone(legacy.Objects)
	if len(c.Objects) > policyhubv1.MaxLegacyNames {
		c.Objects = c.Objects[:policyhubv1.MaxLegacyNames]
	}
	c.Unnamed = max(c.Total-int64(len(c.Objects)), 0)
	if c.Total == 0 {
		c.Why = "no legacy object: Kyverno 1.20's upgrade gate passes"
		return c
	}
	c.UpgradeBlocked = true
	var parts []string
	for _, n := range c.Counts {
		if n.Count > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n.Count, n.Kind, n.Owner))
		}
	}
	c.Why = fmt.Sprintf("%d legacy objects (%s): Kyverno 1.20's Helm upgrade refuses while any exists", c.Total, strings.Join(parts, ", "))
	if c.EnforcesLegacy == "no" {
		c.Why = fmt.Sprintf("%d legacy objects (%s): Kyverno %s no longer enforces them; delete or migrate them", c.Total, strings.Join(parts, ", "), c.KyvernoVersion)
	}
	return c
}

// kindRank orders the legacy kinds as policyhubv1.LegacyKinds lists them; others last.
func kindRank(kind string) int {
	if i := slices.Index(policyhubv1.LegacyKinds, kind); i >= 0 {
		return i
	}
	return len(policyhubv1.LegacyKinds)
}

func (t *LegacyTotals) add(o LegacyTotals) {
	t.Total = aggregate.AddCount(t.Total, o.Total)
	t.Policyhub = aggregate.AddCount(t.Policyhub, o.Policyhub)
	t.Other = aggregate.AddCount(t.Other, o.Other)
}

// InventoryPage is the fleet inventory's web page: the fleet's totals and one page of its
// clusters, those that would fail Kyverno 1.20's upgrade gate first, then those not known.
type InventoryPage struct {
	*Inventory
	Shown []InventoryCluster
	Pages Pages
}

// BuildInventoryPage computes the inventory page (page is 0-based) from a snapshot.
func BuildInventoryPage(s *read.Snapshot, page int) *InventoryPage {
	summaries := make([]*policyhubv1.PolicyReportSummary, len(s.Summaries))
	for i := range s.Summaries {
		summaries[i] = &s.Summaries[i]
	}
	p := &InventoryPage{Inventory: BuildInventory(summaries, s.Clusters, nil, aggregate.JudgedStale)}
	order := slices.Clone(p.Clusters)
	slices.SortStableFunc(order, func(a, b InventoryCluster) int {
		return cmp.Or(compareBool(b.UpgradeBlocked, a.UpgradeBlocked), compareBool(!b.Known, !a.Known), cmp.Compare(b.Total, a.Total))
	})
	p.Pages = paginate(len(order), page, func(n int) string {
		if n == 0 {
			return InventoryURL
		}
		return fmt.Sprintf("%s?page=%d", InventoryURL, n+1)
	})
	if p.Pages.Total > 0 {
		p.Shown = order[p.Pages.From-1 : p.Pages.To]
	}
	return p
}
