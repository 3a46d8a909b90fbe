package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// requiredHubFlags are the only flags of policyhub-hub the benchmark relies on (the hub's flag
// set is being reworked; these are checked against --help before anything starts).
var requiredHubFlags = []string{"kubeconfig", "hub-id", "leader-elect", "metrics-bind-address", "metrics-secure", "health-probe-bind-address", "pprof-bind-address", "gateway-secret-namespace", "resync-interval", "leader-election-namespace"}

// buildHub builds cmd/policyhub-hub of the working tree into dir and checks its flags.
func buildHub(root, dir string) (string, error) {
	bin := filepath.Join(dir, "policyhub-hub")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/policyhub-hub")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/policyhub-hub: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 2 depending on the flag package
	var missing []string
	for _, f := range requiredHubFlags {
		if !bytes.Contains(help, []byte("-"+f+" ")) && !bytes.Contains(help, []byte("-"+f+"\n")) && !bytes.Contains(help, []byte("-"+f+"=")) {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("policyhub-hub no longer has %s; its --help:\n%s", strings.Join(missing, ", "), help)
	}
	return bin, nil
}

// hubProc is one running policyhub-hub process.
type hubProc struct {
	name       string
	pid        int
	metricsURL string
	readyURL   string
	pprofURL   string
	logPath    string
	exited     chan struct{}
	waitErr    error
	cpuSeconds float64 // user and system CPU, once exited
}

// startHub runs the hub binary as its own process group, logging to logPath. It dies with this
// process (parent-death signal; the forking thread lives until the hub has exited).
func startHub(bin, name, logPath string, args ...string) (*hubProc, error) {
	ports := make([]int, 0, 3)
	for len(ports) < 3 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	probeAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	pprofAddr := "127.0.0.1:" + strconv.Itoa(ports[2])
	// Plain HTTP on loopback, deliberately: the benchmark reads the hub's own series, and a
	// secure endpoint would add a TokenReview and a SubjectAccessReview to the hub apiserver's
	// measured work (each time their cache lapses) and TLS to the hub's CPU.
	args = append(args, "--metrics-bind-address="+metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address="+probeAddr, "--pprof-bind-address="+pprofAddr)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "=== %s %s %q\n", time.Now().Format(time.RFC3339), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h := &hubProc{name: name, metricsURL: "http://" + metricsAddr + "/metrics", readyURL: "http://" + probeAddr + "/readyz",
		pprofURL: "http://" + pprofAddr + "/debug/pprof/", logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends the parent-death signal when the forking thread ends: keep it until Wait
		// returns (the goroutine then ends locked, and its thread with it).
		runtime.LockOSThread()
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			close(h.exited)
			return
		}
		h.pid = cmd.Process.Pid
		started <- nil
		h.waitErr = cmd.Wait()
		if ps := cmd.ProcessState; ps != nil {
			h.cpuSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		close(h.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return h, nil
}

func (h *hubProc) exitError() error {
	select {
	case <-h.exited:
		return fmt.Errorf("%s exited (%v); its log: %s", h.name, h.waitErr, h.logPath)
	default:
		return nil
	}
}

// waitReady polls /readyz until it answers 200.
func (h *hubProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := h.exitError(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.readyURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (log: %s)", h.name, timeout, h.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads the series of the named metrics from the hub's /metrics (only those are parsed:
// once summaries are aggregated the page holds a series per cluster, policy and result).
func (h *hubProc) scrape(ctx context.Context, names ...string) (metricSet, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.metricsURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", h.metricsURL, resp.Status)
	}
	return parseMetrics(resp.Body, names...)
}

// stopGrace is how long the hub gets to end after SIGTERM before it is killed (controller-runtime
// gives its runnables 30 s).
const stopGrace = 40 * time.Second

// stop sends SIGTERM to the hub's process group and SIGKILL after stopGrace. It says how long the
// hub took to end and whether it had to be killed (a finding, not an error).
func (h *hubProc) stop() (took time.Duration, killed bool, err error) {
	if h == nil || h.exitError() != nil {
		return 0, false, nil
	}
	start := time.Now()
	_ = syscall.Kill(-h.pid, syscall.SIGTERM)
	select {
	case <-h.exited:
		return time.Since(start), false, nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	select {
	case <-h.exited:
		return time.Since(start), true, nil
	case <-time.After(10 * time.Second):
		return time.Since(start), true, fmt.Errorf("%s (pid %d) did not end after SIGKILL", h.name, h.pid)
	}
}

// logStats counts the lines of the hub's log and those at error level.
func logStats(path string) (lines, errorLines int) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			lines++
			if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "\tERROR\t") {
				errorLines++
			}
		}
		if errors.Is(err, io.EOF) || err != nil {
			return lines, errorLines
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
