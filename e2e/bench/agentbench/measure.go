package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/metrics"
)

// measured is what one run measured.
type measured struct {
	fill time.Duration
	// first is from the agent's start to the first summary on the hub counting every result.
	first              time.Duration
	firstCPU           float64
	peakRSS, settleRSS int64
	idleCPU            float64 // CPU-seconds over idleFor with nothing changing
	idleFor            time.Duration
	// changes are the times from a report's update to the summary on the hub counting it, and
	// the agent's CPU-seconds for each.
	changes    []time.Duration
	changeCPU  []float64
	summary    int // bytes of the summary's spec (JSON)
	hubSeries  map[string]int
	violations int
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s on the hub: %w", name, err)
	}
	return nil
}

func measureAgent(ctx context.Context, o options, w *workload, bin, hubKubeconfig string, cluster *fleet.Cluster, hub client.Client) (*measured, error) {
	logPath := filepath.Join(os.TempDir(), "agentbench-agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := []string{"--cluster-name", cluster.Name, "--hub-kubeconfig", hubKubeconfig,
		"--kubeconfig", cluster.Kubeconfig, "--push-interval", o.pushInterval.String(),
		"--heartbeat-interval", "1h", "--health-probe-bind-address", "0"}
	var pprofAddr string
	if o.profile != "" {
		if pprofAddr, err = freeAddress(); err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address", pprofAddr)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	m := &measured{}

	total, failures := int64(w.results()), w.failures()
	summary := &policyhubv1.PolicyReportSummary{}
	key := client.ObjectKey{Namespace: cluster.Name, Name: policyhubv1.SummaryName}
	counts := func(fail int64) func() bool {
		return func() bool {
			if err := hub.Get(ctx, key, summary); err != nil {
				return false
			}
			t := summary.Spec.Totals
			return t.Pass+t.Fail == total && t.Fail == fail
		}
	}
	if err := waitFor(ctx, 10*time.Minute, pid, &m.peakRSS, counts(failures)); err != nil {
		return nil, fmt.Errorf("the first complete summary (agent log: %s): %w", logPath, err)
	}
	m.first = time.Since(start)
	if s, err := procstat.Read(pid); err == nil {
		m.firstCPU = s.CPU
	}

	// Settled: nothing changes for a while; memory and CPU then.
	m.idleFor = 15 * time.Second
	before, _ := procstat.Read(pid)
	deadline := time.Now().Add(m.idleFor)
	for time.Now().Before(deadline) {
		if s, err := procstat.Read(pid); err == nil {
			m.settleRSS = s.RSS
			m.peakRSS = max(m.peakRSS, s.RSS)
		}
		time.Sleep(200 * time.Millisecond) // sampling, not synchronisation
	}
	after, _ := procstat.Read(pid)
	m.idleCPU = after.CPU - before.CPU
	if o.profile != "" {
		if err := saveHeap(ctx, pprofAddr, o.profile); err != nil {
			return nil, err
		}
	}

	// Changes: one report at a time gets one more failing result.
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		return nil, err
	}
	for k := range o.changes {
		i := k * (w.resources / max(o.changes, 1))
		flip := -1
		for j := range w.perReport {
			if !fails(i, j) {
				flip = j
				break
			}
		}
		report := w.report(i, fmt.Sprintf("res-%06d", i), flip)
		live, err := dyn.Resource(policyReports).Namespace(w.namespace(i)).Get(ctx, string(w.uids[i]), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		report.SetResourceVersion(live.GetResourceVersion())
		cpu0, _ := procstat.Read(pid)
		changed := time.Now()
		if _, err := dyn.Resource(policyReports).Namespace(w.namespace(i)).Update(ctx, report, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update the report of resource %d: %w", i, err)
		}
		if err := waitFor(ctx, time.Minute, pid, &m.peakRSS, counts(failures+int64(k)+1)); err != nil {
			return nil, fmt.Errorf("change %d (agent log: %s): %w", k, logPath, err)
		}
		m.changes = append(m.changes, time.Since(changed))
		cpu1, _ := procstat.Read(pid)
		m.changeCPU = append(m.changeCPU, cpu1.CPU-cpu0.CPU)
	}
	if hwm, err := highWaterMark(pid); err == nil {
		m.peakRSS = max(m.peakRSS, hwm)
	}

	data, err := json.Marshal(summary.Spec)
	if err != nil {
		return nil, err
	}
	m.summary = len(data)
	m.violations = len(summary.Spec.Violations)
	m.hubSeries, err = hubSeries(cluster.Name, &summary.Spec)
	return m, err
}

// waitFor polls done every 20 ms until it holds, sampling the agent's RSS into peak meanwhile.
func waitFor(ctx context.Context, limit time.Duration, pid int, peak *int64, done func() bool) error {
	deadline := time.Now().Add(limit)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", limit)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := procstat.Read(pid)
		if err != nil {
			return fmt.Errorf("the agent exited: %w", err)
		}
		*peak = max(*peak, s.RSS)
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// highWaterMark is the process's peak resident memory (VmHWM), in bytes.
func highWaterMark(pid int) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// hubSeries counts, per metric, the series the hub's compliance metrics export for the summary:
// the hub's own metrics code, fed the summary the agent pushed.
func hubSeries(cluster string, spec *policyhubv1.PolicyReportSummarySpec) (map[string]int, error) {
	reg := prometheus.NewRegistry()
	metrics.NewCompliance(reg, time.Now, nil).Set(cluster, &policyhubv1.PolicyReportSummary{Spec: *spec})
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	return series, nil
}

// freeAddress is a 127.0.0.1 address with a port free at the moment.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// saveHeap saves the agent's heap profile into dir/agent-heap.pb.gz.
func saveHeap(ctx context.Context, addr, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the agent's heap profile: %w", err)
	}
	defer resp.Body.Close()
	out, err := os.Create(filepath.Join(dir, "agent-heap.pb.gz"))
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, resp.Body)
	return err
}
