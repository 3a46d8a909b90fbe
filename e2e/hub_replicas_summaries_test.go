package e2e

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/shard"
)

// replicaAgents are agents (the agent's own push code, under each cluster's agent identity on the
// hub) of clusters that hub replicas share, each reporting fail results of one ClusterPolicy.
type replicaAgents struct {
	pushers map[string]*runningPusher
	fails   map[string]int64
	// hubs are the agents' own clients of the hub (their clusters' agent identities).
	hubs map[string]client.Client
}

// startReplicaAgents starts an agent for each cluster whose summary reports fail results of the
// ClusterPolicy policy: the i-th cluster's i+1.
func startReplicaAgents(t *testing.T, clusters []string, policy string) *replicaAgents {
	t.Helper()
	a := &replicaAgents{pushers: map[string]*runningPusher{}, fails: map[string]int64{}, hubs: map[string]client.Client{}}
	for i, cluster := range clusters {
		hub := directClient(t, agentHubConfig(t, cluster))
		a.hubs[cluster] = hub
		t.Cleanup(func() { deleteSummary(t, cluster) }) // after the agent stopped (cleanups run last first)
		a.pushers[cluster] = startPusher(t, hub, push.Options{Cluster: cluster, Interval: 100 * time.Millisecond, Heartbeat: 5 * time.Second}, &summarySource{})
		a.set(cluster, policy, int64(i+1))
	}
	return a
}

// set makes the cluster's agent report fail results of policy.
func (a *replicaAgents) set(cluster, policy string, fail int64) {
	r := a.pushers[cluster]
	r.src.mu.Lock()
	r.src.spec = policyhubv1.PolicyReportSummarySpec{ContentHash: fmt.Sprint(policy, "-", fail), Totals: policyhubv1.ResultCounts{Fail: fail},
		Policies: []policyhubv1.PolicySummary{{Name: policy, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: fail}}}}
	r.src.mu.Unlock()
	a.fails[cluster] = fail
	r.signal()
}

// relabel is a hostile agent moving its summary to another replica's cache.
func (a *replicaAgents) relabel(t *testing.T, cluster, replica string) {
	t.Helper()
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, policyhubv1.LabelWorkedBy, replica)
	if err := a.hubs[cluster].Patch(testContext(t), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("%s's agent relabels its summary: %v", cluster, err)
	}
}

// total is the fail results the agents report.
func (a *replicaAgents) total() int64 {
	var n int64
	for _, f := range a.fails {
		n += f
	}
	return n
}

// waitLabelled waits until each cluster's summary names the replica that works it (assigned), as
// that replica labels it: each replica caches only the summaries that name it.
func (a *replicaAgents) waitLabelled(t *testing.T, assigned shard.Assignment, what string) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, 30*time.Second, 100*time.Millisecond, what, func() error {
		for cluster := range a.pushers {
			s := &policyhubv1.PolicyReportSummary{}
			if err := hub.Get(testContext(t), client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, s); err != nil {
				return err
			}
			if got, want := s.Labels[policyhubv1.LabelWorkedBy], assigned.Owner(cluster); got != want {
				return fmt.Errorf("%s's summary is labelled worked by %q, want %q", cluster, got, want)
			}
		}
		return nil
	})
}

// resultsSummed checks that a FleetPolicy's status counts every agent's fail results, those of the
// clusters other replicas than its status's writer work included.
func (a *replicaAgents) resultsSummed(fp *fleetView) error {
	if got, want := fp.Status.Summary.Results.Fail, a.total(); got != want {
		return fmt.Errorf("status counts %d fail results, the agents report %d", got, want)
	}
	return nil
}

// failWatch follows every status write of a FleetPolicy from now on.
type failWatch struct {
	mu     sync.Mutex
	lowest int64
	writes int
	stop   context.CancelFunc
	done   chan struct{}
}

// watchFail records the fewest fail results a FleetPolicy's status counted, over every write of
// it from now until stop: a replica that took a cluster over before its summary reached its cache
// would count the cluster's results as gone, and write that.
func watchFail(t *testing.T, policy string) *failWatch {
	t.Helper()
	watcher, err := client.NewWithWatch(fleetOf(t).Hub.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	w, err := watcher.Watch(ctx, &policyhubv1.FleetPolicyList{}, client.MatchingFields{"metadata.name": policy})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := &failWatch{lowest: math.MaxInt64, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if fp, ok := ev.Object.(*policyhubv1.FleetPolicy); ok {
				f.mu.Lock()
				f.lowest, f.writes = min(f.lowest, fp.Status.Summary.Results.Fail), f.writes+1
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return f
}

// end stops the watch and returns the fewest fail results seen, and how many writes it saw.
func (f *failWatch) end() (int64, int) {
	f.stop()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lowest, f.writes
}
