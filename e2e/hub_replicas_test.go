package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/shard"
)

// hubReplica is one policyhub-hub process run with --share-fleet.
type hubReplica struct {
	name    string
	cmd     *exec.Cmd
	metrics string // http://127.0.0.1:P/metrics
	log     string
}

// runReplica starts a hub replica that shares the fleet with the others, its metrics on a port
// of its own (plain HTTP on loopback: the test reads them).
func runReplica(t *testing.T, binary, name string) *hubReplica {
	t.Helper()
	addr := freeAddress(t)
	cmd := runHubProcess(t, binary, name, "--share-fleet", "--replica-name="+name,
		"--metrics-bind-address="+addr, "--metrics-secure=false")
	return &hubReplica{name: name, cmd: cmd, metrics: "http://" + addr + "/metrics",
		log: filepath.Join(fleetOf(t).LogDir, "policyhub-hub-"+name+".log")}
}

// metric reads the value of the replica's first series of name with labels (a gauge's or a
// counter's) from its /metrics.
func (r *hubReplica) metric(ctx context.Context, name string, labels map[string]string) (float64, error) {
	families, err := r.families(ctx)
	if err != nil {
		return 0, err
	}
	f, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("%s: no %s yet", r.name, name)
	}
	for _, m := range f.Metric {
		if matches(m, labels) {
			if m.Gauge != nil {
				return m.Gauge.GetValue(), nil
			}
			return m.Counter.GetValue(), nil
		}
	}
	return 0, fmt.Errorf("%s: no %s%v", r.name, name, labels)
}

// seriesClusters are the cluster labels of the replica's series of name.
func (r *hubReplica) seriesClusters(ctx context.Context, name string) ([]string, error) {
	families, err := r.families(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "cluster" {
				out = append(out, l.GetValue())
			}
		}
	}
	return out, nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// families reads the replica's /metrics.
func (r *hubReplica) families(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// passedClusters are the clusters the replica's log shows a sync pass of, from byte offset on.
func (r *hubReplica) passedClusters(t *testing.T, offset int64) map[string]bool {
	t.Helper()
	logged, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(logged[min(offset, int64(len(logged))):]), "\n") {
		if !strings.Contains(line, `"msg":"applied `) {
			continue
		}
		if m := passCluster.FindStringSubmatch(line); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

var passCluster = regexp.MustCompile(`"cluster":"([^"]+)"`)

func (r *hubReplica) logSize(t *testing.T) int64 {
	t.Helper()
	st, err := os.Stat(r.log)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// expectedAssignment is the assignment the replicas must agree on, made by the test from what
// they read: the live replica Leases (by their own renewTime: the test is on the hub's clock) and
// the credential Secrets.
func expectedAssignment(t *testing.T, ctx context.Context) shard.Assignment {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := cs.CoordinationV1().Leases(e2eHubNamespace).List(ctx, metav1.ListOptions{LabelSelector: policyhubv1.LabelReplicaOf + "=" + e2eHubID})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := placement.CredentialSecrets(ctx, directClient(t, fleetOf(t).Hub.Config), fleetOf(t).SecretNamespace)
	if err != nil {
		t.Fatal(err)
	}
	live := shard.LiveAt(e2eHubID, leases.Items, time.Now())
	clusters := shard.FromSecrets(secrets)
	return shard.Assign(clusters, live, 0)
}

// waitShares waits until every replica sees the same live replicas (want), the fleet of n
// clusters, and owns what expectedAssignment gives it; it returns that assignment.
func waitShares(t *testing.T, replicas []*hubReplica, want []string, n int) shard.Assignment {
	t.Helper()
	ctx := testContext(t)
	var a shard.Assignment
	eventually(t, 60*time.Second, 250*time.Millisecond, fmt.Sprintf("replicas %v share %d clusters", want, n), func() error {
		a = expectedAssignment(t, ctx)
		if !slices.Equal(a.Replicas(), want) {
			return fmt.Errorf("live replica Leases %v, want %v", a.Replicas(), want)
		}
		total := 0
		for _, r := range replicas {
			live, err := r.metric(ctx, "policyhub_replica_live_replicas", nil)
			if err != nil {
				return err
			}
			fleetSize, err := r.metric(ctx, "policyhub_replica_fleet_clusters", nil)
			if err != nil {
				return err
			}
			owned, err := r.metric(ctx, "policyhub_replica_clusters", nil)
			if err != nil {
				return err
			}
			if int(live) != len(want) || int(fleetSize) != n || int(owned) != a.Load(r.name) {
				return fmt.Errorf("%s sees %v live replicas and %v clusters and works %v; want %d, %d, %d", r.name, live, fleetSize, owned, len(want), n, a.Load(r.name))
			}
			total += int(owned)
		}
		if total != n {
			return fmt.Errorf("the replicas work %d clusters in all, want every one of %d exactly once", total, n)
		}
		return nil
	})
	return a
}

// leaseTakeovers watches a cluster's sync Lease and returns, when called, every version that
// changed holder without the previous holder having released it or let it expire: two writers
// whose turns overlapped. A holder change after a release (empty holder) or after the previous
// holder's renewTime + leaseDurationSeconds is a clean turn.
func leaseTakeovers(t *testing.T, ctx context.Context, cluster string) func() (overlaps []string, turns int) {
	t.Helper()
	w := watchSyncLease(t, ctx, cluster)
	var mu sync.Mutex
	var overlaps []string
	turns := 0 // holder changes between two replicas, clean or not
	go func() {
		// last is the latest version with a holder; released, whether a version without one
		// (a release) came after it.
		var last *coordinationv1.Lease
		released := false
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			if ev.Type == watch.Deleted || holder == "" {
				released = true
				continue
			}
			if last != nil && ptr.Deref(last.Spec.HolderIdentity, "") != holder {
				mu.Lock()
				turns++
				if !released && last.Spec.RenewTime != nil && lease.Spec.AcquireTime != nil {
					expired := last.Spec.RenewTime.Add(time.Duration(ptr.Deref(last.Spec.LeaseDurationSeconds, 0)) * time.Second)
					if lease.Spec.AcquireTime.Before(&metav1.MicroTime{Time: expired}) {
						overlaps = append(overlaps, fmt.Sprintf("%s: %s took the Lease at %s from %s, whose turn ran until %s",
							cluster, holder, lease.Spec.AcquireTime.UTC().Format(time.RFC3339Nano), ptr.Deref(last.Spec.HolderIdentity, ""), expired.UTC().Format(time.RFC3339Nano)))
					}
				}
				mu.Unlock()
			}
			last, released = lease, false
		}
	}()
	return func() ([]string, int) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(overlaps), turns
	}
}

// Three hub processes share the fleet (every cluster worked by exactly one, a pinned cluster where
// pinned); one is killed with SIGKILL and a change made at once reaches all its clusters through
// the others within 30 s; a fourth joins and takes its share; every change is written once in
// each apiserver.
func TestHubReplicasShareTheFleet(t *testing.T) {
	binary := buildHubBinary(t)
	ensureHubNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Nine clusters (credential Secrets) on the two managed apiservers, round-robin, plus the
	// fleet's own two: enough that each of three replicas works several.
	var shared []string
	for i := range 9 {
		name := fmt.Sprintf("shared-%d", i)
		like := []string{"cluster-1", "cluster-2"}[i%2]
		labels := map[string]string{"e2e-replicas": "shared"}
		if i == 8 {
			labels[policyhubv1.LabelPinnedReplica] = "replica-c"
		}
		if err := fleetOf(t).AddClusterSecret(ctx, name, fleetOf(t).Cluster(like).URL, like, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleetOf(t).RemoveClusterSecret(context.Background(), name) })
		shared = append(shared, name)
	}
	// Every cluster of the fleet (its own managed clusters, cluster-3 included) and the nine.
	fleetSize := len(fleetOf(t).Managed) + len(shared)
	// Registered before the processes, so it runs after they stopped.
	cleanReplicaLeases(t, "cluster-1", "cluster-2")
	takeovers1, takeovers2 := leaseTakeovers(t, ctx, "cluster-1"), leaseTakeovers(t, ctx, "cluster-2")
	a, b, c := runReplica(t, binary, "replica-a"), runReplica(t, binary, "replica-b"), runReplica(t, binary, "replica-c")
	three := []*hubReplica{a, b, c}
	assigned := waitShares(t, three, []string{"replica-a", "replica-b", "replica-c"}, fleetSize)
	for _, r := range three {
		if assigned.Load(r.name) == 0 {
			t.Errorf("%s works no cluster of %d", r.name, fleetSize)
		}
	}
	if owner := assigned.Owner("shared-8"); owner != "replica-c" {
		t.Errorf("shared-8, pinned to replica-c, is worked by %s", owner)
	}
	// kubectl policyhub clusters names each cluster's replica, from the Leases in the hub's
	// namespace only: a live-looking replica Lease labelled for this hub elsewhere is no replica.
	impostor := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: policyhubv1.ReplicaLeaseName(e2eHubID, "impostor"),
			Labels: map[string]string{policyhubv1.LabelReplicaOf: e2eHubID}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("impostor"), LeaseDurationSeconds: ptr.To(int32(3600)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	hubAdmin := directClient(t, fleetOf(t).Hub.Config)
	if err := hubAdmin.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubAdmin.Delete(context.Background(), impostor) })
	code, out, errOut := cliReadRun(t, "clusters", "-o", "json")
	var listed struct {
		Clusters []struct{ Name, Replica string } `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("kubectl policyhub clusters: exit %d (%v): %s", code, err, errOut)
	}
	for _, cl := range listed.Clusters {
		if cl.Replica != assigned.Owner(cl.Name) {
			t.Errorf("kubectl policyhub clusters: %s worked by %q, the replicas say %q", cl.Name, cl.Replica, assigned.Owner(cl.Name))
		}
	}
	if len(listed.Clusters) != fleetSize {
		t.Errorf("kubectl policyhub clusters lists %d clusters, want %d", len(listed.Clusters), fleetSize)
	}

	const policy = "e2e-replicas"
	// The shared clusters' agents report results of the policy; each replica caches only the
	// summaries of the clusters it works (labelled for it), and the status counts them all.
	agents := startReplicaAgents(t, shared, policy)
	offsets := map[string]int64{}
	for _, r := range three {
		offsets[r.name] = r.logSize(t)
	}
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusterSelector: {matchLabels: {e2e-replicas: shared}}}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, policy, indentedSpec("replicas")))
	allSynced := func(fp *fleetView) error {
		if fp.Status.Summary.Synced != int32(len(shared)) || fp.Status.Summary.Clusters != int32(len(shared)) {
			return fmt.Errorf("%d of %d clusters synced (summary %+v)", fp.Status.Summary.Synced, len(shared), fp.Status.Summary)
		}
		for _, cs := range fp.Clusters {
			if cs.Phase != policyhubv1.ClusterPhaseSynced || cs.ObservedGeneration != fp.Generation {
				return fmt.Errorf("%s: %s at generation %d (%s), want Synced at %d", cs.Name, cs.Phase, cs.ObservedGeneration, cs.Message, fp.Generation)
			}
		}
		return nil
	}
	waitFleetPolicy(t, policy, "synced by three replicas", allSynced)
	agents.waitLabelled(t, assigned, "each summary labelled for the replica that works its cluster")
	waitFleetPolicy(t, policy, "every agent's results counted, whichever replica works its cluster", agents.resultsSummed)
	// An agent may write its summary's labels: one moving it to another replica's cache has it
	// moved back by the replica that works its cluster.
	agents.relabel(t, "shared-0", "replica-x")
	agents.waitLabelled(t, assigned, "an agent's relabelled summary labelled back for its cluster's replica")
	waitFleetPolicy(t, policy, "every agent's results still counted", agents.resultsSummed)
	// Each cluster was worked by its replica only.
	for _, r := range three {
		for cluster := range r.passedClusters(t, offsets[r.name]) {
			if owner := assigned.Owner(cluster); owner != r.name {
				t.Errorf("%s made a pass in %s, which %s works", r.name, cluster, owner)
			}
		}
	}

	// SIGKILL the replica working the most shared clusters other than the pinned one's; change
	// the policy at once: its clusters must have the change within 30 s, from the others.
	victim := a
	for _, r := range []*hubReplica{b} {
		if assigned.Load(r.name) > assigned.Load(victim.name) {
			victim = r
		}
	}
	survivors := slices.DeleteFunc(slices.Clone(three), func(r *hubReplica) bool { return r == victim })
	fails := watchFail(t, policy)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	updateFleetPolicy(t, policy, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Mode = ptr.To(policyhubv1.ModeEnforce) })
	waitFleetPolicyWithin(t, 30*time.Second, policy, "the killed replica's clusters synced by the others", func(fp *fleetView) error {
		if fp.Status.ObservedGeneration != fp.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d", fp.Status.ObservedGeneration, fp.Generation)
		}
		return allSynced(fp)
	})
	t.Logf("%s killed: its clusters synced the change by the others in %s", victim.name, time.Since(killed).Round(100*time.Millisecond))
	names := []string{survivors[0].name, survivors[1].name}
	slices.Sort(names)
	after := waitShares(t, survivors, names, fleetSize)
	if owner := after.Owner("shared-8"); owner != "replica-c" {
		t.Errorf("after the kill, shared-8 (pinned to replica-c) is worked by %s", owner)
	}
	// The killed replica's summaries follow its clusters: their new owners cache them, and
	// count a change of one at once.
	agents.waitLabelled(t, after, "the killed replica's summaries labelled for their new owners")
	// Each new owner keeps a cluster's results until the cluster's summary reaches its cache.
	if lowest, writes := fails.end(); writes == 0 || lowest != agents.total() {
		t.Errorf("during the handover the status counted as few as %d fail results over %d writes, want %d throughout", lowest, writes, agents.total())
	}
	moved := ""
	for _, cluster := range shared {
		if assigned.Owner(cluster) == victim.name {
			moved = cluster
			break
		}
	}
	agents.set(moved, policy, 100)
	waitFleetPolicy(t, policy, "new results of "+moved+" counted by its new owner", agents.resultsSummed)
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		live, err := liveObject(t, cluster, clusterPolicyNamed(policy))
		if err != nil {
			t.Fatal(err)
		}
		if action := ruleFailureAction(live); action != "Enforce" {
			t.Errorf("%s: the policy's failureAction is %q after the change, want Enforce", cluster, action)
		}
	}

	// A fourth replica joins: it takes its share, with nothing missed or written twice.
	d := runReplica(t, binary, "replica-d")
	four := append(slices.Clone(survivors), d)
	names = append(names, "replica-d")
	slices.Sort(names)
	joined := waitShares(t, four, names, fleetSize)
	if joined.Load("replica-d") == 0 {
		t.Errorf("replica-d joined and works no cluster")
	}
	agents.waitLabelled(t, joined, "the summaries of replica-d's clusters labelled for it")
	if in, err := d.metric(testContext(t), "policyhub_replica_handovers_total", map[string]string{"direction": "in"}); err != nil || int(in) != joined.Load("replica-d") {
		t.Errorf("replica-d counts %v clusters handed over to it (%v), want %d", in, err, joined.Load("replica-d"))
	}
	// A replica exports the sync series of the clusters it works only: those it handed to
	// replica-d went with them (a stale "unreachable" in the old owner would alert).
	eventually(t, 20*time.Second, 250*time.Millisecond, "sync series only where the clusters are worked", func() error {
		for _, r := range survivors {
			clusters, err := r.seriesClusters(testContext(t), "policyhub_cluster_reachable")
			if err != nil {
				return err
			}
			for _, cluster := range clusters {
				if owner := joined.Owner(cluster); owner != r.name {
					return fmt.Errorf("%s still exports policyhub_cluster_reachable of %s, which %s works", r.name, cluster, owner)
				}
			}
		}
		return nil
	})
	updateFleetPolicy(t, policy, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Mode = ptr.To(policyhubv1.ModeAudit) })
	waitFleetPolicy(t, policy, "synced after a fourth replica joined", allSynced)

	// Three contents (created, Enforce, Audit): each written once in each apiserver, whatever
	// replicas and clusters share it. A write of the same content persists nothing; one of another
	// content (a replica writing what it was asked before) would raise the generation past 3.
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		live, err := liveObject(t, cluster, clusterPolicyNamed(policy))
		if err != nil {
			t.Fatal(err)
		}
		if live.GetGeneration() != 3 || ruleFailureAction(live) != "Audit" {
			t.Errorf("%s: the policy is at generation %d with failureAction %q, want 3 (one write per change) and Audit", cluster, live.GetGeneration(), ruleFailureAction(live))
		}
	}
	// A PolicySet whose member Kyverno refuses everywhere: its status, written by one replica,
	// counts the member failed in every cluster, those the other replicas work included (their
	// entries carry the objects they could not apply).
	refused := object(t, kyvernoRefusedTemplate)
	refused.SetName("replicas-every-kind")
	placed := 2 + len(shared)
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: e2e-replicas-set}
spec:
  placement: {clusters: [cluster-1, cluster-2, %s]}
  source:
    inline:
    - %s
`, strings.Join(shared, ", "), marshalJSON(refused.Object)))
	waitPolicySet(t, "e2e-replicas-set", "the refused member counted in every cluster", func(s *setView) error {
		if len(s.Status.AttentionMembers) != 1 {
			return fmt.Errorf("attention members %+v", s.Status.AttentionMembers)
		}
		if got := s.Status.AttentionMembers[0]; got.Name != "replicas-every-kind" || got.Action != "Failed" || got.Clusters != int32(placed) || s.Status.Members.Failed != 1 {
			return fmt.Errorf("attention member %+v, members %+v: want replicas-every-kind Failed in all %d clusters", got, s.Status.Members, placed)
		}
		return nil
	})

	// Every version of each apiserver's sync Lease: replicas took turns, each after the previous
	// holder released the Lease or its turn ran out (the killed replica's). The processes' own
	// "Failed to release lease" messages, which the two-process test checks, are not: the shared-N
	// clusters are names of two apiservers, so one replica working two of them holds one Lease
	// object under one identity for both, and its two workers meet on it.
	handed := 0
	for _, takeovers := range []func() ([]string, int){takeovers1, takeovers2} {
		overlaps, turns := takeovers()
		for _, o := range overlaps {
			t.Errorf("two replicas' turns overlapped: %s", o)
		}
		handed += turns
	}
	if handed == 0 {
		t.Error("no sync Lease ever passed from one replica to another: the check above saw nothing")
	}
	t.Logf("the sync Leases passed %d times between replicas, every time after a release or an expiry", handed)

	// One shape of per-cluster state whatever the topology: the set's entries as the replicas
	// wrote them read the same when a single-replica hub writes them anew.
	set := waitPolicySet(t, "e2e-replicas-set", "every placed cluster's entry written", func(s *setView) error {
		if len(s.Clusters) != placed {
			return fmt.Errorf("%d entries, want %d", len(s.Clusters), placed)
		}
		return nil
	})
	byReplicas := comparableEntries(set.Clusters)
	for _, r := range four {
		stopHubProcess(t, r.cmd)
	}
	if err := hubAdmin.DeleteAllOf(ctx, &policyhubv1.ClusterStatusSlice{}, client.InNamespace(e2eHubNamespace),
		client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(set.UID)}); err != nil {
		t.Fatal(err)
	}
	runHubProcess(t, binary, "single")
	waitPolicySet(t, "e2e-replicas-set", "a single-replica hub writes the entries the replicas wrote", func(s *setView) error {
		bySingle := comparableEntries(s.Clusters)
		if !equality.Semantic.DeepEqual(byReplicas, bySingle) {
			return fmt.Errorf("entries differ (replicas, then single):\n%s\n%s", marshalJSON(byReplicas), marshalJSON(bySingle))
		}
		return nil
	})
	if byReplicas[0].ObservedGeneration != set.Generation || len(byReplicas[0].Problems) != 1 {
		t.Errorf("the entry compared carries no shared part (generation %d, problems %+v): the comparison proves nothing", byReplicas[0].ObservedGeneration, byReplicas[0].Problems)
	}
	// The declarations go while the single hub runs (the replicas that made them are gone).
	deletePolicySet(t, "e2e-replicas-set")
	deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}})
}

// comparableEntries are a declaration's per-cluster entries without what is of the writer's
// clock: when it synced and received the reports, and whether it heard the agent lately (a
// restarted hub starts hearing anew).
func comparableEntries(clusters []policyhubv1.ClusterStatus) []policyhubv1.ClusterStatus {
	out := make([]policyhubv1.ClusterStatus, len(clusters))
	for i, c := range clusters {
		c.LastSyncTime, c.ReportTime, c.Stale = nil, nil, false
		out[i] = c
	}
	return out
}

// stopHubProcess stops a hub process with SIGTERM (SIGKILL after 15 s) and waits until it exited.
func stopHubProcess(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// clusterPolicyNamed is a ClusterPolicy reference for liveObject.
func clusterPolicyNamed(name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(clusterPolicyGVK)
	obj.SetName(name)
	return obj
}

// ruleFailureAction is the first rule's validate.failureAction of a live Kyverno policy.
func ruleFailureAction(obj *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if len(rules) == 0 {
		return ""
	}
	rule, _ := rules[0].(map[string]any)
	action, _, _ := unstructured.NestedString(rule, "validate", "failureAction")
	return action
}

// cleanReplicaLeases registers the removal, when the test ends, of the sync Leases of clusters
// and of every replica Lease of the e2e hub: a killed replica's stays behind otherwise. Register it
// before starting the replicas, so it runs after they stopped.
func cleanReplicaLeases(t *testing.T, clusters ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range clusters {
			deleteLease(t, c)
		}
		cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
		if err == nil {
			err = cs.CoordinationV1().Leases(e2eHubNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: policyhubv1.LabelReplicaOf + "=" + e2eHubID})
		}
		if err != nil {
			t.Errorf("delete the replicas' Leases: %v", err)
		}
	})
}
