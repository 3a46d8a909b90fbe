// Command syncbench measures how fast policies reach a fleet and what it costs the clusters, on a
// local fleet, in one run: policyhub's hub controller against (a) a loop running `kubectl apply`
// once per policy per cluster (how Fairwinds' policy sync works) and (b) a bare client-go
// server-side-apply loop with the same parallelism (the ceiling). Then a resync with nothing
// changed, for each. Requests are counted where they land: each managed kube-apiserver's own
// apiserver_request_total. It prints a Markdown table; `make bench-sync` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/fleet"
)

const hubID = "bench-hub"

type options struct {
	clusters, policies, parallel int
	kyverno                      bool
	only                         string
	cpuProfile                   string
	breakdown                    bool
	count                        int
	apiserverProfiles            string
	hubLog                       string
}

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 4, "managed clusters")
	flag.IntVar(&o.policies, "policies", 200, "policies (FleetPolicies), each placed in every cluster")
	flag.IntVar(&o.parallel, "parallel", 8, "requests in flight per cluster for the loops; FleetPolicies reconciled at once for policyhub")
	flag.BoolVar(&o.kyverno, "kyverno", false, "run real Kyverno in the clusters (its admission of every policy is then part of the cost)")
	flag.StringVar(&o.only, "only", "", "run only these methods, comma-separated: plain, ceiling, kubectl, policyhub (for profiling; the comparison needs all), and, named only, watched (the ceiling's loop with a watch cache of ClusterPolicies open in every cluster, as policyhub keeps) kubectl-serial (the kubectl loop, one apply at a time) floor (the ceiling's loop plus each FleetPolicy's creation, status write and Event on the hub, with no controller: the least a hub with status and Events can spend) and floor-watched (the floor with a watch cache open in every cluster: the least a hub that restores drift can spend)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write CPU profiles of this process (the hub controller, the loops' clients), one per measured run and only while it runs, into this directory")
	flag.IntVar(&o.count, "count", 1, "rounds: every method runs this many times (interleaved); the tables show each method's run of median convergence, and each round's ratios are printed")
	flag.BoolVar(&o.breakdown, "breakdown", false, "print, for each run, the requests the hub and the managed apiservers served by verb and resource")
	flag.StringVar(&o.hubLog, "hub-log", "", "write the hub controller's log to this file (default: the fleet's log directory, removed when the fleet stops)")
	flag.StringVar(&o.apiserverProfiles, "apiserver-profiles", "", "write 5-second CPU profiles of the hub's and cluster-1's kube-apiservers, taken from the start of each run, into this directory")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "syncbench: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	// Before the fleet starts, so a bad path fails at once rather than after the fleet's start.
	for _, dir := range []string{o.cpuProfile, o.apiserverProfiles} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("profile directory: %w", err)
		}
	}
	var managed []fleet.ManagedCluster
	for i := 1; i <= o.clusters; i++ {
		managed = append(managed, fleet.ManagedCluster{Name: fmt.Sprintf("cluster-%d", i), Labels: clusterLabels(), Kyverno: o.kyverno})
	}
	fmt.Fprintf(os.Stderr, "syncbench: starting a fleet of %d managed clusters...\n", o.clusters)
	f, err := fleet.Start(ctx, fleet.Options{Managed: managed, Profiling: o.apiserverProfiles != ""})
	if err != nil {
		return err
	}
	defer f.Stop()
	logPath := o.hubLog
	if logPath == "" {
		logPath = filepath.Join(f.LogDir, "policyhub-hub.log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	// Millisecond timestamps: a run lasts seconds, and the log is read to place each pass in it.
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), func(o *zap.Options) { o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder }))
	fmt.Fprintf(os.Stderr, "syncbench: fleet ready; logs in %s\n", f.LogDir)

	b := &bench{o: o, f: f}
	// Each method writes objects of its own name prefix (and round), so none finds another's
	// objects. Rounds interleave the methods, so a noisy neighbour weighs on all of them alike.
	methods := []struct {
		name, prefix string
		run          func(ctx context.Context, prefix string) (cost, cost, error)
	}{
		{"bare client-go SSA loop, plain policies", "plain", b.ssaLoop(plainPolicy, false)},
		{"bare client-go SSA loop, policyhub's objects (ceiling)", "ceiling", b.ssaLoop(renderedPolicy, false)},
		{"kubectl apply loop", "kubectl", b.kubectlLoop(false)},
		{"policyhub", "policyhub", b.policyhub},
		// Not part of the comparison (only with -only): what watching the written objects costs,
		// as policyhub's watch caches do.
		{"bare client-go SSA loop, policyhub's objects, watched", "watched", b.ssaLoop(renderedPolicy, true)},
		// Not part of the comparison either: the kubectl loop one apply at a time, the other way
		// to read "a loop running kubectl apply once per policy per cluster".
		{"kubectl apply loop, one at a time", "kubectl-serial", b.kubectlLoop(true)},
		// Nor this (only with -only): the ceiling's loop plus the hub writes every declaration
		// needs (created, status, Event) and nothing else; how close any hub controller can get.
		{"floor: the ceiling's loop + each FleetPolicy's creation, status and Event, no controller", "floor", b.floor(false)},
		// And the floor of a hub that restores drift: the same with a watch cache open in every
		// cluster, as policyhub keeps.
		{"floor, watched: the floor + a watch cache of ClusterPolicies in every cluster", "floor-watched", b.floor(true)},
	}
	var rows []row
	for _, m := range methods {
		optIn := m.prefix == "watched" || m.prefix == "kubectl-serial" || strings.HasPrefix(m.prefix, "floor")
		if (o.only == "" && !optIn) || slices.Contains(strings.Split(o.only, ","), m.prefix) {
			rows = append(rows, row{name: m.name, prefix: m.prefix, objects: o.clusters * o.policies})
		}
	}
	for round := 1; round <= max(o.count, 1); round++ {
		for i := range rows {
			r := &rows[i]
			prefix := r.prefix
			if round > 1 {
				prefix = fmt.Sprintf("%s%d", r.prefix, round)
			}
			fmt.Fprintf(os.Stderr, "syncbench: round %d: %s...\n", round, r.name)
			var run func(ctx context.Context, prefix string) (cost, cost, error)
			for _, m := range methods {
				if m.prefix == r.prefix {
					run = m.run
				}
			}
			apply, noop, err := run(ctx, prefix)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			r.runs = append(r.runs, [2]cost{apply, noop})
		}
	}
	printTables(o, rows)
	return nil
}

type bench struct {
	o        options
	f        *fleet.Fleet
	profiles int // apiserver profiles taken, to name them
	runs     int // measured runs profiled (-cpuprofile), to name them
}

// clusterLabels are every managed cluster's labels, which every FleetPolicy selects: each
// policy goes to every cluster.
func clusterLabels() map[string]string { return map[string]string{"env": "bench"} }

// fleetPolicy is the benchmark's i-th FleetPolicy, placed in every cluster.
func fleetPolicy(name string, i int) (*policyhubv1.FleetPolicy, error) {
	return benchkit.FleetPolicy(name, i, clusterLabels())
}
