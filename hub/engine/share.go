package engine

import (
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/work"
)

// share is what this replica does for one declaration when the hub's replicas share the fleet
// (hub/shard): it works the clusters it owns, and keeps their entries in the declaration's
// ClusterStatusSlices; the other replicas' entries it keeps as it read them. One replica, the
// declaration's writer (the replica its key hashes to), also writes the declaration's own status
// (counts, conditions, rollout) from every entry, so that the status has one writer and each
// replica writes the status of about its share of the declarations. A single replica owns every
// cluster and writes every status.
type share struct {
	single bool
	// idle: this replica has no share yet (its Lease not seen live) or any more (lost): it does
	// nothing, and every declaration is looked at again when it gets one.
	idle       bool
	me         string
	assignment shard.Assignment
	writes     bool
}

// shareOf is this replica's share of the declaration.
func (e Engine) shareOf(d Declaration) share {
	if e.shard == nil {
		return share{single: true, writes: true}
	}
	a := e.shard.Assignment()
	return share{me: e.shard.Name(), assignment: a, writes: writerOf(a, d.Kind(), d.Object()) == e.shard.Name(),
		idle: len(a.Replicas()) == 0}
}

// writerOf is the replica that writes the status of the declaration obj of kind.
func writerOf(a shard.Assignment, kind string, obj client.Object) string {
	return a.Writer(kind + "/" + obj.GetNamespace() + "/" + obj.GetName())
}

// Writes says whether this replica writes the status of the declaration obj of kind.
func (o *DeclarationOptions) Writes(kind string, obj client.Object) bool {
	return o.Shard == nil || writerOf(o.Shard.Assignment(), kind, obj) == o.Shard.Name()
}

// owns says whether this replica works the cluster (shard.Assignment.Works): the clusters
// assigned to it, and its share of those assigned to nobody.
func (s share) owns(cluster string) bool {
	return s.single || s.assignment.Works(s.me, cluster)
}

// ownedNames keeps the clusters this replica works.
func (s share) ownedNames(clusters []string) []string {
	if s.single {
		return clusters
	}
	var kept []string
	for _, c := range clusters {
		if s.owns(c) {
			kept = append(kept, c)
		}
	}
	return kept
}

// others are the entries of the clusters other replicas work, as read (before). A single
// replica has none.
func (s share) others(before []policyhubv1.ClusterStatus) []policyhubv1.ClusterStatus {
	if s.single {
		return nil
	}
	var out []policyhubv1.ClusterStatus
	for _, c := range before {
		if !s.owns(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// answered marks this replica's entries with the generation they answer (outcomes not pending)
// and the objects their sync could not apply. When the replicas share the fleet the
// declaration's writer reads them; one replica writes them too, so an entry reads the same
// whatever the number of replicas.
func (s share) answered(own []policyhubv1.ClusterStatus, outcomes []Outcome, generation int64) []policyhubv1.ClusterStatus {
	answered := map[string]*work.DeclarationResult{}
	for _, o := range outcomes {
		if !o.Pending {
			answered[o.Cluster] = o.Result
		}
	}
	for i := range own {
		if r, ok := answered[own[i].Name]; ok {
			own[i].ObservedGeneration = generation
			own[i].Problems = problemsOf(r)
		}
	}
	return own
}

// problemsOf are a result's failed and conflicting objects as a slice entry keeps them: without
// diffs, messages cut to what the API allows, at most maxEntryProblems.
func problemsOf(r *work.DeclarationResult) []policyhubv1.PlannedChange {
	if r == nil || len(r.Problems) == 0 {
		return nil
	}
	out := make([]policyhubv1.PlannedChange, 0, min(len(r.Problems), maxEntryProblems))
	for _, p := range r.Problems[:min(len(r.Problems), maxEntryProblems)] {
		p.Diff = ""
		p.Message = policyhubv1.TruncateMessage(p.Message, 1024)
		out = append(out, p)
	}
	return out
}

// maxEntryProblems is ClusterStatus.problems' bound (its CRD's maxItems).
const maxEntryProblems = 10

// view is every cluster's state as the declaration's writer counts it, and the other replicas'
// clusters as outcomes (see othersOutcomes): another replica's state of an older generation than
// the declaration's is Pending, whatever it said of the older one.
func (s share) view(clusters []policyhubv1.ClusterStatus, targets *render.Targets, generation int64) ([]policyhubv1.ClusterStatus, []Outcome) {
	if s.single {
		return clusters, nil
	}
	view := make([]policyhubv1.ClusterStatus, 0, len(clusters))
	var others []policyhubv1.ClusterStatus
	seen := map[string]bool{}
	for _, c := range clusters {
		seen[c.Name] = true
		if !s.owns(c.Name) {
			if c.ObservedGeneration < generation && c.Phase != policyhubv1.ClusterPhasePending {
				c.Phase, c.Message = policyhubv1.ClusterPhasePending, s.waiting(c.Name, generation)
			}
			others = append(others, c)
		}
		view = append(view, c)
	}
	// A selected cluster its owner has not written yet: Pending here; its owner writes its entry.
	for _, name := range targets.Clusters() {
		if !seen[name] && !s.owns(name) {
			c := policyhubv1.ClusterStatus{Name: name, Phase: policyhubv1.ClusterPhasePending, Message: s.waiting(name, generation)}
			others, view = append(others, c), append(view, c)
		}
	}
	sort.Slice(view, func(i, j int) bool { return view[i].Name < view[j].Name })
	return view, othersOutcomes(targets.Source, others)
}

// waiting is the message of another replica's cluster that has not answered generation yet.
func (s share) waiting(cluster string, generation int64) string {
	return fmt.Sprintf("waiting for replica %s to sync generation %d", s.assignment.Owner(cluster), generation)
}

// withOthers joins this replica's entries and the others', sorted by name.
func withOthers(own, others []policyhubv1.ClusterStatus) []policyhubv1.ClusterStatus {
	if len(others) == 0 {
		return own
	}
	all := append(append(make([]policyhubv1.ClusterStatus, 0, len(own)+len(others)), own...), others...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// othersOutcomes are the other replicas' clusters as outcomes, for the writer's rollout and
// counts: a cluster's phase, message and problems as its owner wrote them; when its owner wrote the
// policies there is not known here, so a rollout judges its reports from when its wave was seen
// synced, as after a restart.
func othersOutcomes(source string, others []policyhubv1.ClusterStatus) []Outcome {
	out := make([]Outcome, 0, len(others))
	for _, c := range others {
		out = append(out, Outcome{Cluster: c.Name, Pending: c.Phase == policyhubv1.ClusterPhasePending,
			Result: &work.DeclarationResult{Source: source, Phase: c.Phase, Message: c.Message, Actions: c.Actions, InForce: c.InForce, Problems: c.Problems}})
	}
	return out
}
