// Command summarywrite measures what one write of a cluster's PolicyReportSummary costs the hub's
// kube-apiserver, by the shape of the write (issue 48): the agent's JSON patch of a 50-policy
// summary, the same as a server-side apply, the hub's status patch, a fail-only summary for the
// busy path, the same summary in a copy of the CRD without its CEL rules, the same bytes in a
// ConfigMap (no schema: the floor of storing them in etcd), the same ConfigMap written through
// the hub's aggregation layer to another apiserver (what the hub's apiserver pays when results
// live outside its etcd, as with Kyverno's reports-server), and a Lease renewal (the known
// baseline). Each shape writes -writes times over -namespaces objects, -parallel at a time, after
// one warm-up write per object, against a real etcd and kube-apiserver started by e2e/fleet; the
// CPU of the hub's kube-apiserver and of etcd is read from /proc. `make bench-summary-write`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/e2e/fleet"
)

type options struct {
	writes, namespaces, parallel, policies, violations, watchers int
	only                                                         string
	// rate paces the measured writes (per second; 0: as fast as parallel allows).
	rate float64
}

func main() {
	var o options
	flag.IntVar(&o.writes, "writes", 500, "Measured writes per shape (after one warm-up write per object).")
	flag.IntVar(&o.namespaces, "namespaces", 100, "Namespaces (clusters) written, one object of each shape in each.")
	flag.IntVar(&o.parallel, "parallel", 8, "Writes in flight at once.")
	flag.IntVar(&o.policies, "policies", 50, "Policies in a summary.")
	flag.IntVar(&o.violations, "violations", 10, "Violations listed in the full summary.")
	flag.IntVar(&o.watchers, "watchers", 1, "Watches held open on each written collection of the hub, as the hub's informers hold one (0: none).")
	flag.Float64Var(&o.rate, "rate", 0, "Measured writes per second, paced evenly (0: as fast as -parallel allows). A paced fleet's writes arrive one by one, not back to back.")
	flag.StringVar(&o.only, "only", "", "Comma-separated shape letters to run (e.g. a,d,g); empty: all.")
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "summarywrite: %v\n", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "summarywrite: %v\n", err)
		os.Exit(1)
	}
}

// validate bounds the flags: the objects fit a fleet on one machine, and no two writes of a run
// are in flight on the same object at once (parallel < namespaces).
func (o options) validate() error {
	switch {
	case o.namespaces < 1 || o.namespaces > 1000:
		return fmt.Errorf("-namespaces %d: want 1..1000", o.namespaces)
	case o.writes < 1 || o.writes > 100_000:
		return fmt.Errorf("-writes %d: want 1..100000", o.writes)
	case o.parallel < 1 || o.parallel >= o.namespaces:
		return fmt.Errorf("-parallel %d: want 1..%d (fewer than -namespaces, so no object has two writes in flight)", o.parallel, o.namespaces-1)
	case o.policies < 1 || o.policies > 1000:
		return fmt.Errorf("-policies %d: want 1..1000", o.policies)
	case o.rate < 0 || o.rate > 10_000:
		return fmt.Errorf("-rate %g: want 0..10000", o.rate)
	case o.watchers < 0 || o.watchers > 100:
		return fmt.Errorf("-watchers %d: want 0..100", o.watchers)
	case o.violations < 0 || o.violations > 200:
		return fmt.Errorf("-violations %d: want 0..200 (the CRD's maxItems)", o.violations)
	}
	return nil
}

func run(ctx context.Context, o options) error {
	progress("starting a fleet (hub and 1 managed cluster, policyhub's CRDs only)...")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	// The smallest fleet e2e/fleet starts: it always has at least one managed cluster and the
	// gateway; both stay idle except in shape h, and their CPU is reported apart.
	f, err := fleet.Start(startCtx, fleet.Options{Managed: []fleet.ManagedCluster{{Name: "cluster-1"}}, MinimalCRDs: true})
	cancel()
	if err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	defer f.Stop()
	pids, err := findPIDs()
	if err != nil {
		return err
	}
	b, err := newBench(f, o, pids)
	if err != nil {
		return err
	}
	progress("creating %d namespaces and their objects...", o.namespaces)
	if err := b.setup(ctx); err != nil {
		return err
	}
	if o.watchers > 0 {
		watchCtx, cancel := context.WithCancel(ctx)
		defer cancel() // before the fleet stops: the watches end quietly
		if b.watch, err = startWatchers(watchCtx, b.hub, o.watchers); err != nil {
			return err
		}
	}
	progress("measuring the idle fleet for 10 s...")
	idle := b.idleRates(10 * time.Second)
	var rows []row
	for _, s := range b.shapes() {
		if o.only != "" && !slices.Contains(strings.Split(o.only, ","), s.letter) {
			continue
		}
		progress("shape %s: %s...", s.letter, s.name)
		r, err := b.measure(ctx, s, idle)
		if err != nil {
			return fmt.Errorf("shape %s (%s): %w", s.letter, s.name, err)
		}
		rows = append(rows, r)
	}
	printTable(o, commit(), idle, rows)
	return nil
}

// fleetPIDs are the processes whose CPU is read: the hub's kube-apiserver, etcd (shared by every
// apiserver of the fleet) and the rest (gateway, managed kube-apiserver).
type fleetPIDs struct {
	hubAPIServer, etcd int
	others             []int
}

func findPIDs() (fleetPIDs, error) {
	var p fleetPIDs
	children, err := procstat.Children(os.Getpid())
	if err != nil {
		return p, err
	}
	for _, pid := range children {
		args := procstat.Cmdline(pid)
		if len(args) == 0 {
			continue
		}
		switch {
		case filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--etcd-prefix=/hub"):
			p.hubAPIServer = pid
		case filepath.Base(args[0]) == "etcd":
			p.etcd = pid
		default:
			p.others = append(p.others, pid)
		}
	}
	if p.hubAPIServer == 0 || p.etcd == 0 {
		return p, fmt.Errorf("fleet processes not found among this process's children: hub apiserver %d, etcd %d", p.hubAPIServer, p.etcd)
	}
	return p, nil
}

// Parts of the machine whose CPU is reported.
const (
	partHubAPIServer = "hub kube-apiserver"
	partEtcd         = "etcd"
	partOthers       = "gateway and managed kube-apiserver"
)

func (p fleetPIDs) snapshot() map[string]procstat.Totals {
	return procstat.Sum([]procstat.Group{
		{Name: partHubAPIServer, PIDs: []int{p.hubAPIServer}},
		{Name: partEtcd, PIDs: []int{p.etcd}},
		{Name: partOthers, PIDs: p.others},
	})
}

// commit is the checkout's commit, for the header (with "+dirty" when it has changes).
func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cores() int { return runtime.NumCPU() }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "summarywrite: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
