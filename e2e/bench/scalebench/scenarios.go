package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/gateway"
)

// hubState is what a settled hub costs: its memory and goroutines (from its /metrics), the
// watches it holds open in the managed clusters (from theirs), and the CPU every part uses per
// second while nothing is asked of the hub.
type hubState struct {
	rss           float64 // bytes
	rssFrom       string  // "/metrics" or "/proc"
	goroutines    float64
	goroutinesOK  bool
	watches       float64 // WATCH requests open in the managed apiservers, less the baseline without a hub
	idleCores     map[string]float64
	gatewayRSS    float64
	hubAPIRSS     float64
	settled       bool
	settleTook    time.Duration
	settleResidue float64 // the hub's cores when it did not settle
}

// result is what one scenario measured.
type result struct {
	name, hubID, prefix string
	clusters            int
	clusterNames        []string
	fps                 []string
	start               time.Time

	converge  time.Duration
	converged bool
	missing   int
	phases    string
	cpu       map[string]float64 // CPU seconds while converging
	hubWrites map[string]float64 // mutating requests the hub's apiserver served while converging, by resource
	state     hubState

	statusSynced, statusResults []float64

	noop struct {
		ran        bool
		took       time.Duration
		settled    bool
		cpu        map[string]float64
		reconciles float64
		reconOK    bool
		requests   float64
		hubWrites  map[string]float64
	}
	agg struct {
		ran            bool
		latencies      []float64 // seconds, sorted
		notReached     int
		sendSpan       time.Duration // from the first write sent to the last sent
		writeSpan      time.Duration // from the first write sent to the last stored
		metricClusters int
		cpu            map[string]float64
		hubWrites      map[string]float64
		// the summary marked aggregated by the hub (its series then in /metrics)
		metricLatencies  []float64
		metricNotReached int
	}
	// floor is the status write floor (statusFloor), measured after the aggregation.
	floor struct {
		ran    bool
		rounds int
		round  time.Duration // the fastest round
		took   time.Duration
		cpu    map[string]float64
	}
	dark struct {
		blackHoled, refusing        int
		healthy                     time.Duration
		healthyOK                   bool
		baseline                    time.Duration
		baselineOK                  bool
		failed                      time.Duration
		failedOK                    bool
		failedMissing               int
		accepted                    int
		healthyMissing              int
		blackHoleMsgs, refusingMsgs []string
	}
	logLines, logErrors int
	logPath             string
	stopTook            time.Duration
	stopKilled          bool
}

// settle waits until the hub's CPU stays under 0.1 core for 3 s in a row, for at most maxWait,
// sampling every second. It returns when the quiet stretch began and the snapshot then.
func (b *bench) settle(h *hubProc, maxWait time.Duration) (at time.Time, snap map[string]procstat.Totals, ok bool, residue float64) {
	const window, quiet, idle = time.Second, 3, 0.1
	deadline := time.Now().Add(maxWait)
	type point struct {
		t    time.Time
		snap map[string]procstat.Totals
	}
	points := []point{{time.Now(), b.snapshot(h)}}
	for {
		time.Sleep(window)
		points = append(points, point{time.Now(), b.snapshot(h)})
		n := len(points)
		if n > quiet {
			calm := true
			for i := n - quiet; i < n; i++ {
				cores := (points[i].snap[partHub].CPU - points[i-1].snap[partHub].CPU) / points[i].t.Sub(points[i-1].t).Seconds()
				if cores >= idle {
					calm = false
				}
			}
			if calm {
				p := points[n-quiet-1]
				return p.t, p.snap, true, 0
			}
		}
		if time.Now().After(deadline) || h.exitError() != nil {
			last, first := points[n-1], points[max(n-quiet-1, 0)]
			residue = (last.snap[partHub].CPU - first.snap[partHub].CPU) / last.t.Sub(first.t).Seconds()
			return last.t, last.snap, false, residue
		}
	}
}

// measureState waits for the hub to settle (at most maxSettle) and measures a hubState.
func (b *bench) measureState(ctx context.Context, h *hubProc, baselineWatches float64, maxSettle time.Duration) (hubState, error) {
	var s hubState
	start := time.Now()
	_, _, s.settled, s.settleResidue = b.settle(h, maxSettle)
	s.settleTook = time.Since(start)
	m, err := h.scrape(ctx, "go_goroutines", "process_resident_memory_bytes")
	if err != nil {
		return s, fmt.Errorf("hub /metrics: %w", err)
	}
	s.goroutines, s.goroutinesOK = m.sum("go_goroutines", nil)
	if rss, ok := m.sum("process_resident_memory_bytes", nil); ok {
		s.rss, s.rssFrom = rss, "/metrics"
	} else {
		st, err := procstat.Read(h.pid)
		if err != nil {
			return s, err
		}
		s.rss, s.rssFrom = float64(st.RSS), "/proc"
	}
	if s.watches, err = b.openWatches(ctx); err != nil {
		return s, err
	}
	s.watches -= baselineWatches
	before := b.snapshot(h)
	t0 := time.Now()
	time.Sleep(10 * time.Second)
	after := b.snapshot(h)
	s.idleCores = map[string]float64{}
	for part, v := range cpuBetween(before, after) {
		s.idleCores[part] = v / time.Since(t0).Seconds()
	}
	s.gatewayRSS = float64(after[partGateway].RSS)
	s.hubAPIRSS = float64(after[partHubAPIServer].RSS)
	return s, nil
}

// openWatches sums the WATCH requests open in every managed kube-apiserver
// (apiserver_longrunning_requests{verb="WATCH"}).
func (b *bench) openWatches(ctx context.Context) (float64, error) {
	total := 0.0
	for _, c := range b.f.Managed {
		m, err := scrapeAPIServer(ctx, c.Config, "apiserver_longrunning_requests")
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: %w", c.Name, err)
		}
		v, found := m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
		if !found {
			return 0, fmt.Errorf("%s serves no apiserver_longrunning_requests", c.Name)
		}
		total += v
	}
	return total, nil
}

// hubWrites counts the mutating requests the hub's kube-apiserver has served, by resource
// (resource/subresource), from its apiserver_request_total: the hub's status writes and Events,
// and this benchmark's own writes (FleetPolicies, annotations, summaries).
func (b *bench) hubWrites(ctx context.Context) map[string]float64 {
	m, err := scrapeAPIServer(ctx, b.f.Hub.Config, "apiserver_request_total")
	if err != nil {
		logf("hub kube-apiserver /metrics: %v", err)
		return nil
	}
	out := map[string]float64{}
	for _, s := range m {
		switch s.labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		if s.labels["dry_run"] != "" {
			continue
		}
		key := s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += s.value
	}
	return out
}

// writesBetween is hubWrites' growth between two readings.
func writesBetween(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// managedRequests sums apiserver_request_total over the managed kube-apiservers.
func (b *bench) managedRequests(ctx context.Context) (float64, error) {
	total := 0.0
	for _, c := range b.f.Managed {
		m, err := scrapeAPIServer(ctx, c.Config, "apiserver_request_total")
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: %w", c.Name, err)
		}
		v, _ := m.sum("apiserver_request_total", nil)
		total += v
	}
	return total, nil
}

// startHub starts a policyhub-hub with only the flags the benchmark relies on.
func (b *bench) startHub(ctx context.Context, hubID, secretNamespace string) (*hubProc, error) {
	h, err := startHub(b.hubBin, "policyhub-hub "+hubID, filepath.Join(b.logDir, "policyhub-hub-"+hubID+".log"),
		"--kubeconfig="+b.f.Hub.Kubeconfig,
		"--hub-id="+hubID,
		"--leader-elect=false",
		"--gateway-secret-namespace="+secretNamespace,
		"--resync-interval=1h",
	)
	if err != nil {
		return nil, err
	}
	if err := h.waitReady(ctx, time.Minute); err != nil {
		_, _, _ = h.stop()
		return nil, err
	}
	return h, nil
}

// measureIdle measures a hub with no cluster and no FleetPolicy: the fleet's secret namespace
// holds the real clusters, so this hub reads an empty one instead.
func (b *bench) measureIdle(ctx context.Context) error {
	const empty = "bench-no-clusters"
	if err := b.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: empty}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	baseline, err := b.openWatches(ctx)
	if err != nil {
		return err
	}
	logf("idle hub (no cluster, no FleetPolicy)...")
	h, err := b.startHub(ctx, "bench-idle", empty)
	if err != nil {
		return err
	}
	defer func() { _, _, _ = h.stop() }()
	if b.idle, err = b.measureState(ctx, h, baseline, time.Minute); err != nil {
		return err
	}
	logf("idle hub: RSS %s, goroutines %.0f, watches %+.0f", mib(b.idle.rss), b.idle.goroutines, b.idle.watches)
	_, _, err = h.stop()
	return err
}

// template is the i-th FleetPolicy's ClusterPolicy (the same small policy as bench-sync's).
func template(i int) string {
	return fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  background: false
  rules:
  - name: rule-%d
    match:
      any:
      - resources:
          kinds: [ConfigMap]
          selector:
            matchLabels:
              bench: policy-%d
    validate:
      failureAction: Audit
      message: "configmaps need an owner label"
      pattern:
        metadata:
          labels:
            owner: "?*"
`, i, i)
}

func fleetPolicy(name, set string, i int) (*policyhubv1.FleetPolicy, error) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{setLabel: set}}
	if err := yaml.Unmarshal([]byte(template(i)), &fp.Spec.Template); err != nil {
		return nil, err
	}
	return fp, nil
}

// inParallel runs work(i) for i in [0, count), n at a time, and returns the errors joined.
func inParallel(n, count int, work func(i int) error) error {
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range next {
				if err := work(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// converge runs one scenario's hub from start to a settled state: starts it, creates the
// FleetPolicies (the clock starts at the first), waits until wait says they converged, and
// measures the hub settled. The hub is returned running.
func (b *bench) converge(ctx context.Context, r *result, set string, wait func(t *tracker, deadline time.Time)) (*hubProc, *tracker, error) {
	baseline, err := b.openWatches(ctx)
	if err != nil {
		return nil, nil, err
	}
	h, err := b.startHub(ctx, r.hubID, b.f.SecretNamespace)
	if err != nil {
		return nil, nil, err
	}
	r.logPath = h.logPath
	// The hub reads its inventory and the gateway before any policy exists: not on the clock.
	b.settle(h, 30*time.Second)
	t, stopTracking, err := newTracker(ctx, b.informer, r.prefix)
	if err != nil {
		return h, nil, err
	}
	_ = stopTracking // kept for the life of the run: the dark scenario reads the virtual one's stamps
	b.trackers[r.name] = t
	for i := range b.o.policies {
		r.fps = append(r.fps, fmt.Sprintf("%s-%d", r.prefix, i))
	}
	logf("%s: creating %d FleetPolicies for %d clusters...", r.name, len(r.fps), r.clusters)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	r.start = time.Now()
	waitProfile := b.profileCPU(ctx, h, 30*time.Second, r.name+"-converge-cpu.pb.gz")
	defer waitProfile()
	err = inParallel(8, len(r.fps), func(i int) error {
		fp, err := fleetPolicy(r.fps[i], set, i)
		if err != nil {
			return err
		}
		return b.hub.Create(ctx, fp)
	})
	if err != nil {
		return h, t, err
	}
	wait(t, r.start.Add(b.o.timeout))
	r.cpu = cpuBetween(before, b.snapshot(h))
	r.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	r.phases = t.phases()
	logf("%s: converged: %s; statuses: %s", r.name, fmtDur(r.converge, r.converged, b.o.timeout), r.phases)
	if err := h.exitError(); err != nil {
		return h, t, err
	}
	if r.state, err = b.measureState(ctx, h, baseline, 2*time.Minute); err != nil {
		return h, t, err
	}
	logf("%s: RSS %s, goroutines %.0f, watches %.0f, settled %v", r.name, mib(r.state.rss), r.state.goroutines, r.state.watches, r.state.settled)
	b.saveProfile(ctx, h, "heap", "gc=1", r.name+"-heap.pb.gz")
	b.saveProfile(ctx, h, "goroutine", "debug=1", r.name+"-goroutine.txt")
	r.statusSynced = t.statusBytes()
	return h, t, nil
}

// waitSynced is the convergence wait of the real and virtual scenarios.
func (b *bench) waitSynced(r *result) func(t *tracker, deadline time.Time) {
	return func(t *tracker, deadline time.Time) {
		last, missing, ok := t.waitAll(context.Background(), stampSynced, r.fps, r.clusterNames, deadline)
		r.converged, r.missing = ok, missing
		if ok {
			r.converge = last.Sub(r.start)
		}
	}
}

// finish stops the scenario's hub and removes its FleetPolicies (their finalizers first: the hub
// that would prune is gone, and what it wrote in the clusters carries its own hub id, which no
// later scenario's hub touches).
func (b *bench) finish(ctx context.Context, r *result, h *hubProc) error {
	var stopErr error
	r.stopTook, r.stopKilled, stopErr = h.stop()
	if r.stopKilled {
		logf("%s: the hub did not end within %s of SIGTERM: killed", r.name, stopGrace)
	}
	if r.agg.ran && stopErr == nil {
		if err := b.statusFloor(ctx, r); err != nil {
			logf("%s: %v", r.name, err)
		}
	}
	r.logLines, r.logErrors = logStats(r.logPath)
	for _, name := range r.fps {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := b.hub.Patch(ctx, fp, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := b.hub.Delete(ctx, fp); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return stopErr
}

func (b *bench) runReal(ctx context.Context) error {
	r := &result{name: "real", hubID: "bench-real", prefix: "real", clusters: len(b.f.Managed)}
	for _, c := range b.f.Managed {
		r.clusterNames = append(r.clusterNames, c.Name)
	}
	b.results = append(b.results, r)
	h, _, err := b.converge(ctx, r, "real", b.waitSynced(r))
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("real: %w", err)
	}
	return b.finish(ctx, r, h)
}

// virtualNames are the cluster names of the virtual and dark scenarios.
func (b *bench) virtualNames() []string {
	var out []string
	for i := range b.o.virtual {
		out = append(out, fmt.Sprintf("vc-%04d", i))
	}
	return out
}

// addVirtualClusters writes a credential Secret per virtual name, pointing at the real
// apiservers round-robin with their credentials, and a hub namespace per name (where its agent
// would write its summary), then waits until the gateway serves the last one.
func (b *bench) addVirtualClusters(ctx context.Context) error {
	names := b.virtualNames()
	logf("adding %d cluster names over %d apiservers...", len(names), len(b.f.Managed))
	err := inParallel(16, len(names), func(i int) error {
		real := b.f.Managed[i%len(b.f.Managed)]
		if err := b.f.AddClusterSecret(ctx, names[i], real.URL, real.Name, map[string]string{setLabel: "virtual"}); err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
		if err := b.hub.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	cfg, err := gateway.ClusterConfig(b.f.Hub.Config, names[len(names)-1])
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := getVersion(ctx, cfg)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway does not serve %s a minute after its Secret was written: %w", names[len(names)-1], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// getVersion GETs /version through cfg, waiting at most 5 s.
func getVersion(ctx context.Context, cfg *rest.Config) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

func (b *bench) runVirtual(ctx context.Context) error {
	if err := b.addVirtualClusters(ctx); err != nil {
		return fmt.Errorf("virtual: %w", err)
	}
	r := &result{name: "virtual", hubID: "bench-virtual", prefix: "virtual", clusters: b.o.virtual, clusterNames: b.virtualNames()}
	b.results = append(b.results, r)
	h, t, err := b.converge(ctx, r, "virtual", b.waitSynced(r))
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: %w", err)
	}
	if err := b.noopResync(ctx, r, h); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: no-op resync: %w", err)
	}
	if err := b.aggregation(ctx, r, h, t); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: aggregation: %w", err)
	}
	if err := b.finish(ctx, r, h); err != nil {
		return err
	}
	// The dark scenario converges as this one did: without summaries.
	return inParallel(16, len(r.clusterNames), func(i int) error {
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: r.clusterNames[i], Name: policyhubv1.SummaryName}}
		return client.IgnoreNotFound(b.hub.Delete(ctx, s))
	})
}

// noopResync touches an annotation of every FleetPolicy (a reconcile with nothing to change, as
// the resync timer starts) and measures until the hub is quiet again: the FleetPolicy
// controller has counted a reconcile per FleetPolicy (controller_runtime_reconcile_total) and the
// hub's CPU stays under 0.1 core for 3 s.
func (b *bench) noopResync(ctx context.Context, r *result, h *hubProc) error {
	logf("%s: no-op resync of %d FleetPolicies...", r.name, len(r.fps))
	reconciles := func() (float64, bool) {
		m, err := h.scrape(ctx, "controller_runtime_reconcile_total")
		if err != nil {
			return 0, false
		}
		return m.sum("controller_runtime_reconcile_total", map[string]string{"controller": "fleetpolicy"})
	}
	startRecon, reconOK := reconciles()
	startReq, err := b.managedRequests(ctx)
	if err != nil {
		return err
	}
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	defer b.profileCPU(ctx, h, 30*time.Second, r.name+"-noop-cpu.pb.gz")()
	err = inParallel(8, len(r.fps), func(i int) error {
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench/resync":"%d"}}}`, start.UnixNano())))
		return b.hub.Patch(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.fps[i]}}, patch)
	})
	if err != nil {
		return err
	}
	deadline := start.Add(b.o.timeout)
	for reconOK {
		n, _ := reconciles()
		if n-startRecon >= float64(len(r.fps)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	at, snap, settled, _ := b.settle(h, time.Until(deadline))
	r.noop.ran, r.noop.settled = true, settled
	r.noop.took = at.Sub(start)
	r.noop.cpu = cpuBetween(before, snap)
	r.noop.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	if n, ok := reconciles(); ok && reconOK {
		r.noop.reconciles, r.noop.reconOK = n-startRecon, true
	}
	endReq, err := b.managedRequests(ctx)
	if err != nil {
		return err
	}
	r.noop.requests = endReq - startReq
	logf("%s: no-op resync settled %v after %s: hub %.1f CPU-s, %.0f reconciles, %.0f requests to the clusters", r.name, settled, r.noop.took.Round(10*time.Millisecond), r.noop.cpu[partHub], r.noop.reconciles, r.noop.requests)
	return nil
}

// expectedResults are the results the summary of cluster index ci reports for FleetPolicy index j.
func expectedResults(ci, j int) policyhubv1.ResultCounts {
	return policyhubv1.ResultCounts{Pass: 10, Fail: int64(1 + (ci+j)%7)}
}

// summary is the PolicyReportSummary cluster index ci's agent would write: the results of every
// FleetPolicy's ClusterPolicy in that cluster.
func (b *bench) summary(r *result, ci int) (*unstructured.Unstructured, error) {
	cluster := r.clusterNames[ci]
	now := metav1.Now()
	spec := policyhubv1.PolicyReportSummarySpec{
		Cluster: cluster, GeneratedAt: &now,
		// Long enough that no result turns stale during the benchmark.
		HeartbeatInterval: &metav1.Duration{Duration: time.Hour},
		ContentHash:       fmt.Sprintf("bench-%d", now.UnixNano()),
		Engine:            policyhubv1.EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2"}, KyvernoWebhooks: true},
	}
	for j, fp := range r.fps {
		res := expectedResults(ci, j)
		spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{Name: fp, Kind: "ClusterPolicy", Severity: "medium", Category: "bench", Results: res})
		spec.Totals.Pass += res.Pass
		spec.Totals.Fail += res.Fail
	}
	s := &policyhubv1.PolicyReportSummary{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: "PolicyReportSummary"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// aggregation writes one summary per cluster name, as its agent would (server-side apply, field
// manager policyhub-agent), -summary-rate per second, and measures for each the time from its
// write until every FleetPolicy's status shows its results for that cluster.
func (b *bench) aggregation(ctx context.Context, r *result, h *hubProc, t *tracker) error {
	index := map[string]int{}
	for i, c := range r.clusterNames {
		index[c] = i
	}
	fpIndex := map[string]int{}
	for j, fp := range r.fps {
		fpIndex[fp] = j
	}
	t.setExpect(func(fp, cluster string) (policyhubv1.ResultCounts, bool) {
		ci, ok := index[cluster]
		j, ok2 := fpIndex[fp]
		if !ok || !ok2 {
			return policyhubv1.ResultCounts{}, false
		}
		return expectedResults(ci, j), true
	})
	st, stopSummaries, err := newSummaryTracker(ctx, b.informer)
	if err != nil {
		return err
	}
	defer stopSummaries()
	logf("%s: writing %d summaries at %.0f/s...", r.name, len(r.clusterNames), b.o.summaryRate)
	written := make([]time.Time, len(r.clusterNames))
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	defer b.profileCPU(ctx, h, 60*time.Second, r.name+"-aggregation-cpu.pb.gz")()
	// As many writes in flight as it takes to hold the rate: agents do not wait for each other.
	sem := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range r.clusterNames {
		if wait := time.Until(start.Add(time.Duration(float64(i) / b.o.summaryRate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u, err := b.summary(r, i)
			if err == nil {
				hash, _, _ := unstructured.NestedString(u.Object, "spec", "contentHash")
				st.expect(r.clusterNames[i], hash)
				err = b.hub.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("policyhub-agent"), client.ForceOwnership)
				// The clock starts when the summary is stored, as the hub can see it.
				written[i] = time.Now()
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	r.agg.sendSpan = time.Since(start)
	wg.Wait()
	r.agg.writeSpan = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	deadline := time.Now().Add(b.o.timeout)
	t.waitAll(ctx, stampResults, r.fps, r.clusterNames, deadline)
	aggregated := st.wait(r.clusterNames, deadline)
	r.agg.cpu = cpuBetween(before, b.snapshot(h))
	r.agg.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	for i, c := range r.clusterNames {
		if s, ok := aggregated[c]; ok {
			r.agg.metricLatencies = append(r.agg.metricLatencies, max(s.Sub(written[i]).Seconds(), 0))
		} else {
			r.agg.metricNotReached++
		}
	}
	slices.Sort(r.agg.metricLatencies)
	at, _ := t.reachedAt(stampResults, r.fps, r.clusterNames)
	r.agg.ran = true
	for i, c := range r.clusterNames {
		s, ok := at[c]
		if !ok {
			r.agg.notReached++
			continue
		}
		// The status can arrive before the write's answer: 0.
		r.agg.latencies = append(r.agg.latencies, max(s.Sub(written[i]).Seconds(), 0))
	}
	slices.Sort(r.agg.latencies)
	r.statusResults = t.statusBytes()
	if clusters, err := b.metricClusters(ctx, h); err == nil {
		for _, c := range r.clusterNames {
			if clusters[c] {
				r.agg.metricClusters++
			}
		}
	} else {
		logf("%s: hub /metrics: %v", r.name, err)
	}
	logf("%s: summaries in every status for %d of %d clusters; p50 %.2fs p99 %.2fs", r.name, len(r.agg.latencies), len(r.clusterNames),
		percentile(r.agg.latencies, 50), percentile(r.agg.latencies, 99))
	return nil
}

// metricClusters is the set of clusters policyhub_policy_results has series for.
func (b *bench) metricClusters(ctx context.Context, h *hubProc) (map[string]bool, error) {
	m, err := h.scrape(ctx, "policyhub_policy_results")
	if err != nil {
		return nil, err
	}
	return m.labelValues("policyhub_policy_results", "cluster"), nil
}

// darkNames splits the virtual names: every 10th black-holed, every 20th (offset 5) refusing.
func darkNames(names []string) (blackHoled, refusing, healthy []string) {
	for i, n := range names {
		switch {
		case i%10 == 0:
			blackHoled = append(blackHoled, n)
		case i%20 == 5:
			refusing = append(refusing, n)
		default:
			healthy = append(healthy, n)
		}
	}
	return blackHoled, refusing, healthy
}

func (b *bench) runDark(ctx context.Context) error {
	names := b.virtualNames()
	blackHoled, refusing, healthy := darkNames(names)
	r := &result{name: "dark", hubID: "bench-dark", prefix: "dark", clusters: len(names), clusterNames: names}
	r.dark.blackHoled, r.dark.refusing = len(blackHoled), len(refusing)
	b.results = append(b.results, r)
	var holes []*fleet.BlackHole
	defer func() {
		for _, bh := range holes {
			_ = bh.Close()
		}
	}()
	for _, n := range blackHoled {
		bh, err := fleet.StartBlackHole()
		if err != nil {
			return err
		}
		holes = append(holes, bh)
		if err := b.f.SetClusterEndpoint(ctx, n, bh.URL()); err != nil {
			return err
		}
	}
	for _, n := range refusing {
		u, err := fleet.RefusingURL()
		if err != nil {
			return err
		}
		if err := b.f.SetClusterEndpoint(ctx, n, u); err != nil {
			return err
		}
	}
	logf("dark: %d names black-holed, %d refusing, %d healthy", len(blackHoled), len(refusing), len(healthy))
	// The healthy names' convergence in the virtual run, where every name answered.
	for _, v := range b.results {
		if v.name == "virtual" && v.converged {
			vt := v.start
			at, missing := b.trackerReached(v, healthy)
			if missing == 0 {
				r.dark.baseline, r.dark.baselineOK = at.Sub(vt), true
			}
		}
	}
	darkSet := append(slices.Clone(blackHoled), refusing...)
	h, t, err := b.converge(ctx, r, "virtual", func(t *tracker, deadline time.Time) {
		var wg sync.WaitGroup
		wg.Go(func() {
			last, missing, ok := t.waitAll(ctx, stampSynced, r.fps, healthy, deadline)
			r.dark.healthyOK, r.dark.healthyMissing = ok, missing
			if ok {
				r.dark.healthy = last.Sub(r.start)
			}
		})
		wg.Go(func() {
			last, missing, ok := t.waitAll(ctx, stampFailed, r.fps, darkSet, deadline)
			r.dark.failedOK, r.dark.failedMissing = ok, missing
			if ok {
				r.dark.failed = last.Sub(r.start)
			}
		})
		wg.Wait()
		r.converged, r.converge, r.missing = r.dark.healthyOK, r.dark.healthy, r.dark.healthyMissing
	})
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("dark: %w", err)
	}
	bhSet, refSet := map[string]bool{}, map[string]bool{}
	for _, n := range blackHoled {
		bhSet[n] = true
	}
	for _, n := range refusing {
		refSet[n] = true
	}
	r.dark.blackHoleMsgs = t.messages(policyhubv1.ClusterPhaseFailed, bhSet, 2)
	r.dark.refusingMsgs = t.messages(policyhubv1.ClusterPhaseFailed, refSet, 2)
	for _, bh := range holes {
		r.dark.accepted += bh.Accepted()
	}
	return b.finish(ctx, r, h)
}

// trackerReached is when the virtual run's statuses showed every given name Synced.
func (b *bench) trackerReached(v *result, names []string) (time.Time, int) {
	t := b.trackers[v.name]
	if t == nil {
		return time.Time{}, len(names)
	}
	at, missing := t.reachedAt(stampSynced, v.fps, names)
	var last time.Time
	for _, s := range at {
		if s.After(last) {
			last = s
		}
	}
	return last, missing
}

func mib(bytes float64) string { return fmt.Sprintf("%.0f MiB", bytes/(1<<20)) }
