package fleet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// launcher starts processes from one goroutine locked to its OS thread. Linux sends the
// parent-death signal when the *thread* that forked a child ends, and Go may end idle threads, so
// children are forked from a thread that lives until the launcher is closed, after Stop.
type launcher struct {
	requests chan launchRequest
	done     chan struct{}
}

type launchRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

func newLauncher() *launcher {
	l := &launcher{requests: make(chan launchRequest), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, which only happens after every
		// child was stopped.
		defer close(l.done)
		for req := range l.requests {
			req.reply <- req.cmd.Start()
		}
	}()
	return l
}

func (l *launcher) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	l.requests <- launchRequest{cmd: cmd, reply: reply}
	return <-reply
}

func (l *launcher) close() {
	close(l.requests)
	<-l.done
}

// process is one running program of the fleet, with its log file.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// start runs the program, appending its output to its log file (a restart keeps the earlier log).
func (p *process) start(l *launcher) error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s %q\n", time.Now().Format(time.RFC3339), p.path, p.args)
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := l.start(cmd); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return nil
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError says how the process ended, for errors raised while waiting for it to be ready.
func (p *process) exitError() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); its log: %s", p.name, p.waitErr, p.logPath)
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL when it has not ended after grace.
func (p *process) stop(grace time.Duration) error {
	if !p.running() {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop %s: pid %d did not end after SIGKILL", p.name, pgid)
	}
}

// pid is the process id, or 0 when it never started.
func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process may take it before the
// fleet's program binds it; the window is small, a failed start says so in its log, and an
// apiserver is then started on another port (Cluster.startFirst).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	seen := map[int]bool{}
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// poll calls check until it returns true or an error, the process exits, or ctx ends.
func poll(ctx context.Context, interval time.Duration, what string, proc *process, check func(context.Context) (bool, error)) error {
	var lastErr error
	for {
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		if proc != nil {
			if exitErr := proc.exitError(); exitErr != nil {
				return fmt.Errorf("waiting for %s: %w", what, exitErr)
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// getOK sends GET url and reports whether the answer was 200 OK; any other answer is the error.
func getOK(ctx context.Context, httpClient *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return true, nil
}

func writeFile(dir, name string, data []byte) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
