package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// aliases maps the clusters tests made up (aliasCluster) to the fleet's clusters serving them.
var aliases sync.Map

// aliasCluster makes name a cluster of the fleet, served by the fleet's cluster of: its gateway
// Secret points at of's apiserver, so the hub syncs it, and an agent run for it reads of. A test
// gets a cluster of its own — its hub namespace, summary and agent Lease — on a shared apiserver,
// and can stop, silence or re-time its agent beside the other tests. Placements must name it:
// the tests' label selectors never select it. Removed when the test ends.
func aliasCluster(t *testing.T, name, of string) {
	t.Helper()
	ctx := testContext(t)
	if err := fleetOf(t).AddClusterSecret(ctx, name, fleetOf(t).Cluster(of).URL, of, nil); err != nil {
		t.Fatal(err)
	}
	aliases.Store(name, of)
	t.Cleanup(func() {
		aliases.Delete(name)
		if err := fleetOf(t).RemoveClusterSecret(context.Background(), name); err != nil {
			t.Errorf("remove cluster %s: %v", name, err)
		}
	})
}

// managedCluster is the fleet's cluster named cluster, or the one serving that alias.
func managedCluster(t *testing.T, cluster string) *fleet.Cluster {
	if of, ok := aliases.Load(cluster); ok {
		cluster = of.(string)
	}
	return fleetOf(t).Cluster(cluster)
}

// startAgent runs the cluster's agent in-process until the test ends. It reads the managed
// cluster as the fleet's admin and writes the hub with its own identity: a ServiceAccount token
// whose RBAC is config/rbac/agent-hub-access, as an operator would set it up.
func startAgent(t *testing.T, cluster string) {
	t.Helper()
	startAgentBeating(t, cluster, time.Minute)
}

// startAgentBeating runs the cluster's agent as startAgent does, renewing its Lease every
// heartbeat (a rollout takes an agent heard well after a version arrived as having reported it).
func startAgentBeating(t *testing.T, cluster string, heartbeat time.Duration) {
	t.Helper()
	startAgentWith(t, cluster, heartbeat, metricsURLs(managedCluster(t, cluster).KyvernoMetricsURL))
}

// startAgentWith runs the cluster's agent as startAgentBeating does, reading Kyverno's metrics
// at kyvernoMetrics (its --kyverno-metrics-url).
func startAgentWith(t *testing.T, cluster string, heartbeat time.Duration, kyvernoMetrics []string) {
	t.Helper()
	if _, parallel := testScope(t); parallel && fleetOf(t) == testFleet {
		if !slices.Equal(kyvernoMetrics, metricsURLs(managedCluster(t, cluster).KyvernoMetricsURL)) {
			t.Fatal("a parallel test shares the cluster's agent, which reads Kyverno's metrics where the fleet serves them: run this test serially")
		}
		parallelAgents.use(t, cluster)
		return
	}
	stop := runAgentWith(t, cluster, heartbeat, kyvernoMetrics)
	t.Cleanup(func() {
		stop()
		// The agent is gone, as if uninstalled: so is its summary, or it would turn stale under
		// the next tests and change the status they watch.
		deleteSummary(t, cluster)
	})
}

// runAgent runs the cluster's agent until stop is called (stop waits for it to end, and may be
// called more than once); what it wrote on the hub stays.
func runAgent(t *testing.T, cluster string, heartbeat time.Duration) (stop func()) {
	t.Helper()
	return runAgentWith(t, cluster, heartbeat, metricsURLs(managedCluster(t, cluster).KyvernoMetricsURL))
}

// runAgentWith runs the cluster's agent as runAgent does, reading Kyverno's metrics at
// kyvernoMetrics: the fleet's Kyverno runs as processes, with no Pods to find them at.
func runAgentWith(t *testing.T, cluster string, heartbeat time.Duration, kyvernoMetrics []string) (stop func()) {
	t.Helper()
	end := launchAgent(t, cluster, heartbeat, kyvernoMetrics)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := end(); err != nil {
				t.Errorf("agent of %s: %v", cluster, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// launchAgent runs the cluster's agent until end is called (once), which waits for it to end.
func launchAgent(t *testing.T, cluster string, heartbeat time.Duration, kyvernoMetrics []string) (end func() error) {
	t.Helper()
	return launchAgentTweaked(t, cluster, heartbeat, kyvernoMetrics, nil)
}

// launchAgentTweaked runs the cluster's agent as launchAgent does, with its options changed by
// tweak (when not nil) before it starts.
func launchAgentTweaked(t *testing.T, cluster string, heartbeat time.Duration, kyvernoMetrics []string, tweak func(*agent.Options)) (end func() error) {
	t.Helper()
	hubCfg := agentHubConfig(t, cluster)
	ctx, cancel := context.WithCancel(context.Background())
	ctx = log.IntoContext(ctx, ctrl.Log.WithName("agent"))
	o := agent.Options{
		Cluster: cluster, Managed: managedCluster(t, cluster).Config, Hub: hubCfg,
		PushInterval: 500 * time.Millisecond, Heartbeat: heartbeat, DiscoveryInterval: 2 * time.Second,
		KyvernoMetricsURLs: kyvernoMetrics,
	}
	if tweak != nil {
		tweak(&o)
	}
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, o)
	}()
	return func() error {
		cancel()
		return <-done
	}
}

// parallelAgents are the agents the parallel tests share: one per cluster, as a real cluster
// runs one, started by the first parallel test that needs it and stopped (its summary deleted)
// when the last one ends. Two agents of one cluster would write one summary in turn.
var parallelAgents = &sharedAgents{byCluster: map[string]*sharedAgent{}}

// parallelAgentHeartbeat is the shared agents' Lease renewal: the shortest any parallel test
// asks (a rollout's gate waits for an agent heard after its version arrived).
const parallelAgentHeartbeat = 2 * time.Second

type sharedAgents struct {
	mu        sync.Mutex
	byCluster map[string]*sharedAgent
}

type sharedAgent struct {
	users int
	end   func() error
}

// use runs the cluster's shared agent for t, until t and every other test using it ended.
func (s *sharedAgents) use(t *testing.T, cluster string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.byCluster[cluster]
	if a == nil {
		a = &sharedAgent{end: launchAgent(t, cluster, parallelAgentHeartbeat, metricsURLs(managedCluster(t, cluster).KyvernoMetricsURL))}
		s.byCluster[cluster] = a
	}
	a.users++
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if a.users--; a.users > 0 {
			return
		}
		delete(s.byCluster, cluster)
		if err := a.end(); err != nil {
			t.Errorf("agent of %s: %v", cluster, err)
		}
		deleteSummary(t, cluster)
	})
}

// metricsURLs is the agent's --kyverno-metrics-url for a cluster's Kyverno metrics endpoint
// ("" when it runs no Kyverno).
func metricsURLs(url string) []string {
	if url == "" {
		return nil
	}
	return []string{url}
}

// deleteSummary deletes the cluster's summary from the hub, and its agent's Lease.
func deleteSummary(t *testing.T, cluster string) {
	hub := directClient(t, fleetOf(t).Hub.Config)
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
	if err := hub.Delete(context.Background(), s); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %s's summary: %v", cluster, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.AgentLeaseName}}
	if err := hub.Delete(context.Background(), lease); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %s's agent Lease: %v", cluster, err)
	}
}

// agentHubConfig sets up the cluster's agent identity on the hub from config/rbac/agent-hub-access
// (the cluster's namespace, its ServiceAccount, Role and RoleBinding) and returns a hub config
// that authenticates with a token of that ServiceAccount only.
func agentHubConfig(t *testing.T, cluster string) *rest.Config {
	t.Helper()
	return agentHubConfigOn(t, fleetOf(t).Hub.Config, cluster)
}

// agentHubConfigOn is agentHubConfig on the hub hub (a fleet of the test's own).
func agentHubConfigOn(t *testing.T, hub *rest.Config, cluster string) *rest.Config {
	t.Helper()
	setUpAgentHubAccessOn(t, hub, cluster)
	cfg := rest.AnonymousClientConfig(hub)
	cfg.BearerToken = agentHubTokenOn(t, hub, cluster, nil)
	return cfg
}

// setUpAgentHubAccess applies config/rbac/agent-hub-access for the cluster on the hub.
func setUpAgentHubAccess(t *testing.T, cluster string) {
	t.Helper()
	setUpAgentHubAccessOn(t, fleetOf(t).Hub.Config, cluster)
}

// setUpAgentHubAccessOn is setUpAgentHubAccess on the hub hubConfig.
func setUpAgentHubAccessOn(t *testing.T, hubConfig *rest.Config, cluster string) {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, hubConfig)
	// Cluster namespaces are shared by tests and never deleted (no namespace controller runs).
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create hub namespace %s: %v", cluster, err)
	}
	manifest, err := os.ReadFile("../config/rbac/agent-hub-access/agent_access.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(strings.ReplaceAll(string(manifest), "namespace: CLUSTER", "namespace: "+cluster), "\n---\n") {
		apply(ctx, t, hub, object(t, doc))
	}
}

// agentHubToken mints an hour's token of the cluster's agent ServiceAccount on the hub, bound to
// an object when bound is given (the token dies with it).
func agentHubToken(t *testing.T, cluster string, bound *authenticationv1.BoundObjectReference) string {
	t.Helper()
	return agentHubTokenOn(t, fleetOf(t).Hub.Config, cluster, bound)
}

// agentHubTokenOn is agentHubToken on the hub hub.
func agentHubTokenOn(t *testing.T, hub *rest.Config, cluster string, bound *authenticationv1.BoundObjectReference) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(cluster).CreateToken(testContext(t), "policyhub-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600)), BoundObjectRef: bound}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s's agent: %v", cluster, err)
	}
	return tr.Status.Token
}

func ptrTo[T any](v T) *T { return &v }

// hubSummaryOf reads the cluster's summary from the hub.
func hubSummaryOf(t *testing.T, cluster string) (*policyhubv1.PolicyReportSummary, error) {
	t.Helper()
	s := &policyhubv1.PolicyReportSummary{}
	err := directClient(t, fleetOf(t).Hub.Config).Get(testContext(t), client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, s)
	return s, err
}

// markSeenAt records, as the hub's status of the cluster's summary, that the hub saw its current
// generation at seen: what a hub that restarted since finds. The hub judges freshness by it. It
// waits for the running hub to record its own observation first: the hub keeps the time of a
// generation once recorded, so it cannot overwrite this one afterwards.
func markSeenAt(ctx context.Context, t *testing.T, cluster string, seen time.Time) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var s *policyhubv1.PolicyReportSummary
	eventually(t, 30*time.Second, 200*time.Millisecond, cluster+"'s summary seen by the hub", func() error {
		var err error
		if s, err = hubSummaryOf(t, cluster); err != nil {
			return err
		}
		if s.Status.ObservedGeneration != s.Generation || s.Status.ObservedTime == nil {
			return fmt.Errorf("status %+v of generation %d", s.Status, s.Generation)
		}
		return nil
	})
	orig := s.DeepCopy()
	s.Status.ObservedGeneration = s.Generation
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	if err := hub.Status().Patch(ctx, s, client.MergeFrom(orig)); err != nil {
		t.Fatalf("mark %s's summary seen at %v: %v", cluster, seen, err)
	}
}

// clusterStatus returns the FleetPolicy's status of the cluster, or nil.
func clusterStatus(fp *fleetView, cluster string) *policyhubv1.ClusterStatus {
	for i := range fp.Clusters {
		if fp.Clusters[i].Name == cluster {
			return &fp.Clusters[i]
		}
	}
	return nil
}

// waitResults polls the FleetPolicy until check accepts its status. Reports take Kyverno a while
// (admission reports are merged after about 10 s; the fleet's background scan runs every 30 s).
func waitResults(t *testing.T, name, what string, check func(*fleetView) error) *fleetView {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var fp *fleetView
	eventually(t, 3*time.Minute, 500*time.Millisecond, what, func() error {
		var err error
		if fp, err = fleetPolicyWithClusters(testContext(t), hub, name); err != nil {
			return err
		}
		return check(fp)
	})
	return fp
}

// scrape returns the value of the series of metric whose labels include all of labels, from the
// hub's /metrics; ok is false when there is no such series.
func (h *testHub) scrape(t *testing.T, metric string, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	resp, err := http.Get(h.metricsURL)
	if err != nil {
		t.Fatalf("scrape the hub's /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(line, fmt.Sprintf("%s=%q", k, v)) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		return v, true
	}
	return 0, false
}
