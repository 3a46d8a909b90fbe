package work

import (
	"fmt"
	"sort"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Tenants' budgets: how many objects the declarations of one tenant (a hub namespace: its
// ApplicationPolicies, KubeVela Applications and FleetPolicyExceptions) may hold in one cluster.
// A cluster's worker sees every declaration wanted there, so it decides before any write, from
// those alone: the same wanted declarations give the same decision in any pass and any replica.

// DefaultTenantBudget is WorkersOptions.TenantBudget's default: a tenant's hundred
// ApplicationPolicies over five namespaces each; ten such tenants stay within the default cache
// bound (DefaultMaxOwnedObjects).
const DefaultTenantBudget = 500

// TenantBudgetFlag is the hub's flag that sets the budget; refusals name it.
const TenantBudgetFlag = "max-objects-per-tenant-per-cluster"

// demand is what one declaration asks of a cluster, as the budget counts it.
type demand struct {
	source, tenant string
	created        time.Time
	// objects is how many objects it renders there (a dry-run's too: the same declaration holds
	// them once out of dry-run, and the decision should not flip with the mode).
	objects int
}

// refusal says why a declaration is refused in a cluster.
type refusal struct {
	tenant string
	// holding is what the tenant would hold with it and every older declaration of it.
	holding, objects, budget int
}

// overBudgetMark is in every refusal's message; OverBudget finds it.
const overBudgetMark = " (--" + TenantBudgetFlag + ")"

func (r refusal) message(cluster string) string {
	return fmt.Sprintf("tenant %s would hold %d objects in %s, over its budget of %d%s: this declaration, which renders %d of them, is not synced there, and what it held there is removed",
		r.tenant, r.holding, cluster, r.budget, overBudgetMark, r.objects)
}

// OverBudget says whether a cluster's phase and message are a refusal for a tenant's budget: a
// state only a change of the tenant's declarations (or of the budget) ends, not retried.
func OverBudget(failed bool, message string) bool {
	return failed && strings.HasPrefix(message, "tenant ") && strings.Contains(message, overBudgetMark+": ")
}

// admit decides, for the declarations of one cluster, which a budget refuses: per tenant, its
// declarations oldest first (by creation time, then source) are admitted while what they hold
// together stays within budget; the first past it and every newer one are refused, so a tenant
// never holds more than its budget and its newest declarations are the ones that wait. Removals
// (declarations wanting nothing in the cluster) hold nothing and are never refused; declarations
// of no tenant (the platform's) are not counted.
func admit(budget int, demands []demand) map[string]refusal {
	byTenant := map[string][]demand{}
	for _, d := range demands {
		if d.tenant != "" && d.objects > 0 {
			byTenant[d.tenant] = append(byTenant[d.tenant], d)
		}
	}
	refused := map[string]refusal{}
	for tenant, ds := range byTenant {
		sort.Slice(ds, func(i, j int) bool {
			if !ds[i].created.Equal(ds[j].created) {
				return ds[i].created.Before(ds[j].created)
			}
			return ds[i].source < ds[j].source
		})
		holding, over := 0, false
		for _, d := range ds {
			holding += d.objects
			if holding > budget {
				over = true
			}
			if over {
				refused[d.source] = refusal{tenant: tenant, holding: holding, objects: d.objects, budget: budget}
			}
		}
	}
	return refused
}

// rebudget counts the tenant's budget in the worker's cluster again, from every declaration of
// the tenant wanted there (w.tenants; Want adds to it, and what is no longer wanted as the
// tenant's leaves it here), and marks for a pass those whose admission changed (a refused one is
// synced as wanting nothing; one admitted again, as it wants). ws.mu is held.
func (ws *Workers) rebudget(w *worker, tenant string) {
	if tenant == "" {
		return
	}
	sources := w.tenants[tenant]
	demands := make([]demand, 0, len(sources))
	for source := range sources {
		want, ok := w.wants[source]
		if !ok || want.decl.Tenant != tenant {
			delete(sources, source)
			if r, was := w.refused[source]; was && r.tenant == tenant {
				delete(w.refused, source)
			}
			continue
		}
		demands = append(demands, demand{source: source, tenant: tenant, created: want.decl.Created, objects: len(want.decl.Objects)})
	}
	if len(sources) == 0 {
		delete(w.tenants, tenant)
	}
	refused := admit(ws.opts.TenantBudget, demands)
	changed := false
	for source := range sources {
		now, isRefused := refused[source]
		was, wasRefused := w.refused[source]
		if isRefused == wasRefused && now == was {
			continue
		}
		if isRefused {
			w.refused[source] = now
		} else {
			delete(w.refused, source)
		}
		w.dirty[source] = true
		changed = true
	}
	if changed && w.unreachable == nil {
		w.poke()
	}
}

// refusals are the refusal messages of the declarations of a pass ("" for those admitted), as
// decided when the pass took them. ws.mu is held.
func refusals(w *worker, sources []string) []string {
	out := make([]string, len(sources))
	for i, source := range sources {
		if r, refused := w.refused[source]; refused {
			out[i] = r.message(w.cluster.Name)
		}
	}
	return out
}

// refuse turns the results of the declarations refused for their tenant's budget (synced as
// wanting nothing in the cluster) into the refusal. A removal that failed stays that failure,
// retried, with the refusal said after it.
func refuse(res *ClusterResult, refused []string) {
	for i, msg := range refused {
		if msg == "" || i >= len(res.Declarations) {
			continue
		}
		r := res.Declarations[i]
		switch r.Phase {
		case policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseDryRun:
			r.Phase, r.Message, r.InForce = policyhubv1.ClusterPhaseFailed, msg, nil
		default:
			r.Message = policyhubv1.TruncateMessage("what it held here could not be removed: "+r.Message+"; "+msg, 2048)
		}
	}
}
