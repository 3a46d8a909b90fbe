package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Restart backoff of a replica that exited: a kubelet's CrashLoopBackOff doubles from 10 s to
// 5 min; the benchmark's runs are minutes long, so it doubles from 1 s to 10 s.
const (
	restartBackoffFirst = time.Second
	restartBackoffMax   = 10 * time.Second
)

// restartBackoff is how long to wait before a replica's next start, once it has been restarted
// `restarts` times already.
func restartBackoff(restarts int) time.Duration {
	d := restartBackoffFirst
	for i := 0; i < restarts && d < restartBackoffMax; i++ {
		d *= 2
	}
	return min(d, restartBackoffMax)
}

// replicaSet runs the replicas as their Deployment would: a replica that exits while still wanted
// (not killed on purpose, not stopping) is started again, with the same name and flags, after a
// backoff. The hub exits non-zero when it loses its membership Lease; without this a lost replica
// would stay gone for the rest of the run.
type replicaSet struct {
	start func(ctx context.Context, name string) (*hubProc, error)
	names []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	procs     []*hubProc // the running (or last) process of each replica
	restarts  []int
	unwanted  []bool  // killed on purpose: not restarted
	exitedCPU float64 // CPU seconds of the replicas' processes that have ended
	stopping  bool
}

// startReplicaSet starts every replica, waiting for each to be ready, and supervises them.
func startReplicaSet(ctx context.Context, names []string, start func(ctx context.Context, name string) (*hubProc, error)) (*replicaSet, error) {
	s := &replicaSet{start: start, names: names, procs: make([]*hubProc, len(names)),
		restarts: make([]int, len(names)), unwanted: make([]bool, len(names))}
	s.ctx, s.cancel = context.WithCancel(ctx)
	for i, name := range names {
		h, err := start(s.ctx, name)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.mu.Lock()
		s.procs[i] = h
		s.mu.Unlock()
		s.wg.Add(1)
		go s.supervise(i, h)
	}
	return s, nil
}

// supervise waits for replica i's process h to end and starts it again while it is wanted.
func (s *replicaSet) supervise(i int, h *hubProc) {
	defer s.wg.Done()
	for {
		select {
		case <-h.exited:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		s.exitedCPU += h.cpuSeconds
		wanted := !s.stopping && !s.unwanted[i]
		backoff := restartBackoff(s.restarts[i])
		s.mu.Unlock()
		if !wanted {
			return
		}
		logf("replicas: %s exited (%v) while wanted; restarting it in %s (log: %s)", s.names[i], h.waitErr, backoff, h.logPath)
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			s.mu.Lock()
			wanted = !s.stopping && !s.unwanted[i]
			s.restarts[i]++
			backoff = restartBackoff(s.restarts[i])
			s.mu.Unlock()
			if !wanted {
				return
			}
			next, err := s.start(s.ctx, s.names[i])
			if err == nil {
				h = next
				break
			}
			// A start that failed (not ready in time) counts as a crash too, as in a CrashLoop.
			logf("replicas: restarting %s: %v; again in %s", s.names[i], err, backoff)
		}
		s.mu.Lock()
		stopping := s.stopping
		if !stopping {
			s.procs[i] = h
		}
		n := s.restarts[i]
		s.mu.Unlock()
		if stopping { // stop has already stopped the processes it knew of
			_, _, _ = h.stop()
			return
		}
		logf("replicas: %s restarted (restart %d), pid %d", s.names[i], n, h.pid)
	}
}

// current is each replica's running (or last) process.
func (s *replicaSet) current() []*hubProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*hubProc(nil), s.procs...)
}

// restartCounts are the restarts by replica name.
func (s *replicaSet) restartCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.names))
	for i, n := range s.names {
		out[n] = s.restarts[i]
	}
	return out
}

// endedCPU is the CPU seconds of the replicas' processes that have ended (procstat reads only
// the living).
func (s *replicaSet) endedCPU() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitedCPU
}

// kill SIGKILLs replica i on purpose: it is not restarted.
func (s *replicaSet) kill(i int) {
	s.mu.Lock()
	s.unwanted[i] = true
	h := s.procs[i]
	s.mu.Unlock()
	if h != nil {
		_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	}
}

// stop ends the supervision, then every replica.
func (s *replicaSet) stop() {
	s.mu.Lock()
	s.stopping = true
	procs := append([]*hubProc(nil), s.procs...)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	for _, h := range procs {
		if h != nil {
			_, _, _ = h.stop()
		}
	}
}

// String says the restarts by replica, for a log line.
func (s *replicaSet) String() string {
	return fmt.Sprint(s.restartCounts())
}
