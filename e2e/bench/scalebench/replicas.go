package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/shard"
)

// replicasResult is what the replicas scenario measured: one replica on a third of the names
// (the baseline), then -replicas replicas sharing all of them, then one of those killed.
type replicasResult struct {
	names, replicas, policies int
	// baseline: one replica on names/replicas clusters.
	baseClusters int
	baseConverge time.Duration
	baseOK       bool
	baseRSS      float64
	// shared: every replica on every name.
	converge time.Duration
	ok       bool
	owned    map[string]float64 // policyhub_replica_clusters, by replica
	restarts map[string]int     // by replica: started again after exiting while wanted
	rss      map[string]float64
	// kill: the replica working the most clusters SIGKILLed, one FleetPolicy changed at once.
	victim          string
	victimClusters  int
	first           time.Duration // until the first cluster of the victim held the change
	firstOK         bool
	resumed         time.Duration // until every cluster of the victim held it
	resumedOK       bool
	allDone         time.Duration // until every cluster held it
	allOK           bool
	objects         int // the FleetPolicies' objects in the real apiservers
	writtenTwice    int // objects whose generation says they were written more than once per content
	notWritten      int // objects without the change
	pendingAtChange int
	// summaries: every name's agent summary, each cached by its cluster's replica only.
	summaries *summaryCaches
	// fleet: the machine and the replicas while converging on every name.
	fleet *replicasFleet
}

// replicaClusterNames are the replicas scenario's cluster names.
func (b *bench) replicaClusterNames() []string {
	out := make([]string, b.o.replicaClusters)
	for i := range out {
		out[i] = fmt.Sprintf("rc-%04d", i)
	}
	return out
}

// replicaThird labels the first third of the replicas scenario's names: the baseline's clusters.
const replicaThird = "bench-third"

// runReplicas is the replicas scenario.
func (b *bench) runReplicas(ctx context.Context) error {
	n, k := b.o.replicaClusters, b.o.replicas
	names := b.replicaClusterNames()
	base := n / k
	logf("replicas: adding %d cluster names over %d apiservers...", n, len(b.f.Managed))
	if err := b.addClusters(ctx, names, func(i int) map[string]string {
		labels := map[string]string{setLabel: "replicas"}
		if i < base {
			labels[replicaThird] = "yes"
		}
		return labels
	}, b.leasePerName("replicas", n)); err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	res := &replicasResult{names: n, replicas: k, policies: b.o.policies, baseClusters: base, owned: map[string]float64{}, rss: map[string]float64{}}
	b.replicasRes = res

	if b.o.replicaBaseline {
		if err := b.replicaBaseline(ctx, names[:base], res); err != nil {
			return err
		}
	}

	// k replicas on every name, restarted when they exit as their Deployment would restart them.
	replicaNames := make([]string, k)
	for i := range k {
		replicaNames[i] = fmt.Sprintf("replica-%d", i)
	}
	set, err := startReplicaSet(ctx, replicaNames, func(ctx context.Context, name string) (*hubProc, error) {
		return b.startReplica(ctx, "bench-rep", name)
	})
	if err != nil {
		return err
	}
	defer set.stop()
	if err := waitFor(ctx, time.Minute, func() bool {
		for _, h := range set.current() {
			m, err := h.scrape(ctx, "policyhub_replica_live_replicas")
			if live, found := m.sum("policyhub_replica_live_replicas", nil); err != nil || !found || live != float64(k) {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("replicas: the %d replicas did not see each other live: %w", k, err)
	}
	fps := b.fleetPolicyNames("rep")
	t, stop, err := newTracker(ctx, b.informer, "rep-")
	if err != nil {
		return err
	}
	defer stop()
	baselineWatches, err := b.openWatches(ctx)
	if err != nil {
		return err
	}
	before := b.snapshotReplicas(set.current())
	endedBefore := set.endedCPU()
	start := time.Now()
	if err := b.createFleetPolicies(ctx, fps, map[string]string{setLabel: "replicas"}); err != nil {
		return err
	}
	res.fleet = &replicasFleet{}
	stopProgress := b.progress("replicas", t, set.current, res.fleet)
	last, missing, ok := t.waitAll(ctx, stampSynced, fps, names, start.Add(b.o.timeout))
	stopProgress()
	res.ok, res.converge = ok, last.Sub(start)
	res.fleet.took, res.fleet.phases = time.Since(start), t.phases()
	after := b.snapshotReplicas(set.current())
	hubCPU := after[partHub]
	hubCPU.CPU += set.endedCPU() - endedBefore // the replicas' processes that ended while waiting
	after[partHub] = hubCPU
	res.fleet.cpu = cpuBetween(before, after)
	procs := set.current()
	b.measureReplicasFleet(ctx, procs, replicaNames, baselineWatches, res.fleet)
	res.restarts = set.restartCounts()
	for i, h := range procs {
		if m, err := h.scrape(ctx, "policyhub_replica_clusters"); err == nil {
			res.owned[replicaNames[i]], _ = m.sum("policyhub_replica_clusters", nil)
		}
		res.rss[replicaNames[i]] = float64(procstat.Sum([]procstat.Group{{Name: "r", PIDs: []int{h.pid}}})["r"].RSS)
	}
	logf("replicas: %d replicas on %d clusters: converged %s (%d missing); clusters %v; RSS %v; restarts %v; membership Leases lost %v", k, n, fmtDur(res.converge, ok, b.o.timeout), missing, res.owned, res.rss, res.restarts, res.fleet.leasesLost)
	logf("replicas: %s; goroutines %v; watches %.0f; lock_held %v; unreachable %v; sync Lease conflicts %d, failed writes %d, failed renewals %d in the logs; least MemAvailable %.0f MiB; %s",
		res.fleet.phases, res.fleet.goroutines, res.fleet.watches, res.fleet.lockHeld, res.fleet.unreach, res.fleet.leaseConflicts, res.fleet.leaseWritesFailed, res.fleet.leaseRenewFailed, res.fleet.minAvailMiB, res.fleet.relay)
	if b.o.replicaSummaries {
		if res.summaries, err = b.measureSummaryCaches(ctx, procs, replicaNames, names); err != nil {
			return err
		}
	}

	if !b.o.replicaKill || !ok {
		logf("replicas: no kill (-replica-kill=%v, converged %v)", b.o.replicaKill, ok)
		set.stop()
		return b.dropFleetPolicies(ctx, fps)
	}

	// Kill the replica working the most, and change every FleetPolicy at once.
	victim := 0
	for i := range procs {
		if res.owned[replicaNames[i]] > res.owned[replicaNames[victim]] {
			victim = i
		}
	}
	res.victim = replicaNames[victim]
	owned, err := b.ownedBy(ctx, "bench-rep", res.victim)
	if err != nil {
		return err
	}
	victimClusters := slices.DeleteFunc(owned, func(c string) bool { return !slices.Contains(names, c) })
	res.victimClusters = len(victimClusters)
	// The fleet is converged and quiet: one FleetPolicy changes as the replica dies, so the times
	// are the handover's (detection, then the new owners' passes), not the fleet's throughput.
	changed := fps[:1]
	set.kill(victim)
	killed := time.Now()
	if err := b.hub.Patch(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: changed[0]}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"mode":"Enforce"}}`))); err != nil {
		return err
	}
	deadline := killed.Add(b.o.timeout)
	for time.Now().Before(deadline) {
		done, pending, err := b.atGeneration(ctx, changed, 2)
		if err != nil {
			return err
		}
		if !res.firstOK && anyIn(done, victimClusters) {
			res.first, res.firstOK = time.Since(killed), true
		}
		if !res.resumedOK && allIn(done, victimClusters, len(changed)) {
			res.resumed, res.resumedOK = time.Since(killed), true
		}
		res.pendingAtChange = pending
		if pending == 0 {
			res.allDone, res.allOK = time.Since(killed), true
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	logf("replicas: %s killed (%d clusters): the first of them held the change after %s, all of them after %s, every cluster after %s", res.victim, len(victimClusters),
		fmtDur(res.first, res.firstOK, b.o.timeout), fmtDur(res.resumed, res.resumedOK, b.o.timeout), fmtDur(res.allDone, res.allOK, b.o.timeout))
	if res.summaries != nil {
		res.summaries.relabelled, res.summaries.relabelledOK = b.summariesLeft(ctx, res.victim, killed)
	}
	if err := b.countWrites(ctx, fps, changed, res); err != nil {
		return err
	}
	set.stop()
	return b.dropFleetPolicies(ctx, fps)
}

// replicaBaseline converges one replica (sharing, alone) on the first third of the names.
func (b *bench) replicaBaseline(ctx context.Context, names []string, res *replicasResult) error {
	solo, err := b.startReplica(ctx, "bench-rep1", "solo")
	if err != nil {
		return err
	}
	fps := b.fleetPolicyNames("rep1")
	t, stop, err := newTracker(ctx, b.informer, "rep1")
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.createFleetPolicies(ctx, fps, map[string]string{replicaThird: "yes"}); err != nil {
		return err
	}
	last, missing, ok := t.waitAll(ctx, stampSynced, fps, names, start.Add(b.o.timeout))
	stop()
	res.baseOK, res.baseConverge = ok, last.Sub(start)
	res.baseRSS = float64(procstat.Sum([]procstat.Group{{Name: "solo", PIDs: []int{solo.pid}}})["solo"].RSS)
	logf("replicas: baseline, 1 replica on %d clusters: converged %s (%d missing), RSS %s", len(names), fmtDur(res.baseConverge, ok, b.o.timeout), missing, mib(res.baseRSS))
	_, _, _ = solo.stop()
	if err := b.dropFleetPolicies(ctx, fps); err != nil {
		return err
	}
	return nil
}

// startReplica starts a hub replica sharing the fleet.
func (b *bench) startReplica(ctx context.Context, hubID, name string) (*hubProc, error) {
	return b.startNamedHub(ctx, hubID+"-"+name, hubID, b.f.SecretNamespace, "--share-fleet", "--replica-name="+name)
}

func (b *bench) fleetPolicyNames(prefix string) []string {
	out := make([]string, b.o.policies)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func (b *bench) createFleetPolicies(ctx context.Context, names []string, selector map[string]string) error {
	return inParallel(8, len(names), func(i int) error {
		fp, err := benchkit.FleetPolicy(names[i], i, selector)
		if err != nil {
			return err
		}
		return b.hub.Create(ctx, fp)
	})
}

// dropFleetPolicies deletes the FleetPolicies without waiting for a hub to prune them (the
// scenario's hubs are stopped; what they wrote carries their hub id, which no later hub touches).
func (b *bench) dropFleetPolicies(ctx context.Context, names []string) error {
	return inParallel(8, len(names), func(i int) error {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
		if err := b.hub.Patch(ctx, fp, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return client.IgnoreNotFound(b.hub.Delete(ctx, fp))
	})
}

// ownedBy are the clusters replica works, as the replicas assign them (from their live Leases
// and the credential Secrets).
func (b *bench) ownedBy(ctx context.Context, hubID, replica string) ([]string, error) {
	leases := &coordinationv1.LeaseList{}
	if err := b.hub.List(ctx, leases, client.InNamespace(b.f.SecretNamespace), client.MatchingLabels{policyhubv1.LabelReplicaOf: hubID}); err != nil {
		return nil, err
	}
	secrets, err := placement.CredentialSecrets(ctx, b.hub, b.f.SecretNamespace)
	if err != nil {
		return nil, err
	}
	return shard.Assign(shard.FromSecrets(secrets), shard.LiveAt(hubID, leases.Items, time.Now()), 0).Owned(replica), nil
}

// atGeneration reads the FleetPolicies' ClusterStatusSlices: the clusters whose entry is Synced at
// generation gen (by cluster: how many of the FleetPolicies), and how many entries are not.
func (b *bench) atGeneration(ctx context.Context, fps []string, gen int64) (map[string]int, int, error) {
	list := &policyhubv1.ClusterStatusSliceList{}
	if err := b.hub.List(ctx, list, client.InNamespace(b.f.SecretNamespace)); err != nil {
		return nil, 0, err
	}
	want := map[string]bool{}
	for _, fp := range fps {
		want[fp] = true
	}
	done, pending := map[string]int{}, 0
	for _, s := range list.Items {
		if s.Declaration.Kind != policyhubv1.KindFleetPolicy || !want[s.Declaration.Name] {
			continue
		}
		for _, c := range s.Clusters {
			if c.Phase == policyhubv1.ClusterPhaseSynced && c.ObservedGeneration >= gen {
				done[c.Name]++
			} else {
				pending++
			}
		}
	}
	return done, pending, nil
}

func anyIn(done map[string]int, clusters []string) bool {
	for _, c := range clusters {
		if done[c] > 0 {
			return true
		}
	}
	return false
}

func allIn(done map[string]int, clusters []string, policies int) bool {
	for _, c := range clusters {
		if done[c] < policies {
			return false
		}
	}
	return true
}

// countWrites reads every FleetPolicy's object in every real apiserver: created, it is at
// generation 1, and 2 when changed once; more means a content was written twice (or a stale one
// after the change), less that the change is missing.
func (b *bench) countWrites(ctx context.Context, fps, changed []string, res *replicasResult) error {
	for _, m := range b.f.Managed {
		c, err := client.New(m.Config, client.Options{})
		if err != nil {
			return err
		}
		for _, name := range fps {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion("kyverno.io/v1")
			obj.SetKind("ClusterPolicy")
			if err := c.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
				return fmt.Errorf("%s: ClusterPolicy %s: %w", m.Name, name, err)
			}
			res.objects++
			want := int64(1)
			if slices.Contains(changed, name) {
				want = 2
			}
			switch g := obj.GetGeneration(); {
			case g > want:
				res.writtenTwice++
			case g < want:
				res.notWritten++
			}
		}
	}
	return nil
}

// waitFor polls ok until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}

// printReplicas prints the replicas scenario's table.
func (b *bench) printReplicas() {
	r := b.replicasRes
	if r == nil {
		return
	}
	fmt.Printf("\nReplicas sharing the fleet: %d FleetPolicies; one replica on %d names (the baseline), then %d replicas on %d names; then the one working the most SIGKILLed and one FleetPolicy changed at once:\n\n",
		r.policies, r.baseClusters, r.replicas, r.names)
	fmt.Println("| measure | 1 replica, a third of the names | " + fmt.Sprint(r.replicas) + " replicas, every name |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| clusters | %d | %d |\n", r.baseClusters, r.names)
	baseConverge, baseRSS := fmtDur(r.baseConverge, r.baseOK, b.o.timeout), mib(r.baseRSS)
	if !b.o.replicaBaseline {
		baseConverge, baseRSS = "not run (-replica-baseline=false)", "–"
	}
	fmt.Printf("| converge | %s | %s |\n", baseConverge, fmtDur(r.converge, r.ok, b.o.timeout))
	names := make([]string, 0, len(r.owned))
	for n := range r.rss {
		names = append(names, n)
	}
	slices.Sort(names)
	owned, rss, most, sum := "", "", 0.0, 0.0
	for _, n := range names {
		owned += fmt.Sprintf("%s %.0f; ", n, r.owned[n])
		rss += fmt.Sprintf("%s %s; ", n, mib(r.rss[n]))
		most, sum = max(most, r.owned[n]), sum+r.owned[n]
	}
	imbalance := 0.0
	if sum > 0 {
		imbalance = most / (sum / float64(len(names)))
	}
	fmt.Printf("| clusters per replica (max/mean) | %d | %s(%.3f) |\n", r.baseClusters, owned, imbalance)
	fmt.Printf("| RSS per replica | %s | %s|\n", baseRSS, rss)
	restarts := ""
	for _, n := range names {
		restarts += fmt.Sprintf("%s %d; ", n, r.restarts[n])
	}
	fmt.Printf("| restarts per replica (exited while wanted, started again after a 1–10 s backoff) | – | %s|\n", restarts)
	printReplicasFleet(r.fleet, names)
	printSummaryCaches(r.summaries, r.owned, names, b.o.timeout)
	if r.victim == "" {
		fmt.Println("| a replica killed | – | not run (-replica-kill=false, or the replicas did not converge) |")
		return
	}
	fmt.Printf("| killed replica's %d clusters, a FleetPolicy changed at the kill: the first holds it | – | %s |\n", r.victimClusters, fmtDur(r.first, r.firstOK, b.o.timeout))
	fmt.Printf("| … all of them hold it | – | %s |\n", fmtDur(r.resumed, r.resumedOK, b.o.timeout))
	fmt.Printf("| every cluster holds it | – | %s (%d entries not at the end) |\n", fmtDur(r.allDone, r.allOK, b.o.timeout), r.pendingAtChange)
	fmt.Printf("| objects in the real apiservers written more than once per content / missing the change | – | %d / %d of %d |\n", r.writtenTwice, r.notWritten, r.objects)
}
