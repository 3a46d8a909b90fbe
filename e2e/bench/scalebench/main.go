// Command scalebench measures the policyhub hub controller at fleet scale, on a local fleet, in
// one run: the real policyhub-hub binary (built from the working tree) against K real managed
// kube-apiservers, then against N cluster names (gateway credential Secrets) spread over those
// apiservers, then with some of those names dark (black-holed or refusing). It prints Markdown
// tables and the targets met or not; `make bench-scale` runs it.
//
// Scenarios:
//   - real: K clusters × P FleetPolicies; convergence, the hub's RSS, goroutines and the watches
//     it keeps open in the clusters, CPU per process, and the cost of one cluster (the values with
//     the hub running less those of a hub with no cluster, divided by the clusters).
//   - virtual: N names × P; the same, plus the size of each FleetPolicy's status, what a resync
//     with nothing to change costs, and how long an agent's summary takes to reach the statuses.
//   - dark: the virtual scenario with 10 % of the names black-holed and 5 % refusing connections:
//     how much the healthy names' convergence slows, and how soon every dark name shows Failed.
//   - cli: `kubectl policyhub status NAME` of a FleetPolicy on M clusters (-cli-clusters), its
//     ClusterStatusSlices written by the benchmark: the CLI's read at a fleet size the other
//     scenarios do not reach on one machine.
//   - replicas (only when named in -only): -replicas hub replicas sharing -replica-clusters names
//     (--share-fleet), against one replica on a third of them: convergence, clusters and RSS per
//     replica; then the replica working the most SIGKILLed and one FleetPolicy changed at once:
//     how long until its clusters, and every cluster, hold the change, and whether any object in
//     the clusters was written twice.
//   - sets (only when named in -only): the same S small ClusterPolicies (-set-members) on the N
//     names, first as S FleetPolicies, then as one PolicySet reading them from a policy library
//     ConfigMap: convergence, the hub's RSS and the bytes of status and ClusterStatusSlices of
//     each; then a new version of the set with one member changed: how soon every cluster runs
//     it, and how many objects the hub wrote to the clusters for it.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/e2e/fleet"
)

type options struct {
	real, virtual, policies int
	only                    string
	timeout                 time.Duration
	summaryRate             float64
	quiet, quietHeartbeat   time.Duration
	quietWrite              string
	busy, busyEvery         time.Duration
	busyMoves               string
	busyFailShare           float64
	busyPaced               bool
	cliClusters             int
	replicaClusters         int
	replicas                int
	replicaSummaries        bool
	setMembers              int
	// leasePerName: unset means on for the replicas scenario from leasePerNameFrom names.
	leasePerName    optionalBool
	replicaBaseline bool
	replicaKill     bool
	logDir          string
	profileDir      string
}

func main() {
	var o options
	flag.IntVar(&o.real, "real", 16, "real managed clusters (kube-apiservers); fewer are started when the machine's memory does not hold them (the output says so)")
	flag.IntVar(&o.virtual, "virtual", 1000, "cluster names for the virtual and dark scenarios: gateway credential Secrets pointing at the real apiservers, round-robin")
	flag.IntVar(&o.policies, "policies", 50, "FleetPolicies, each a small kyverno.io/v1 ClusterPolicy placed in every cluster of the scenario")
	flag.StringVar(&o.only, "only", "real,virtual,dark,cli", "scenarios to run, comma-separated: real, virtual, dark (dark runs virtual too: it is dark's baseline), cli (kubectl policyhub status at -cli-clusters), sets (PolicySet vs FleetPolicies on the -virtual names; not run unless named), replicas (-replicas hub replicas sharing -replica-clusters names; not run unless named)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "deadline of each measured wait (convergence, dark clusters Failed, summaries in status); the table then says \"not reached in\" it")
	flag.Float64Var(&o.summaryRate, "summary-rate", 100, "summaries written per second in the virtual scenario (1000 agents at their default 10 s push interval: 100/s)")
	flag.DurationVar(&o.quiet, "quiet", 3*time.Minute, "how long the virtual scenario's quiet fleet runs: every agent renews its Lease each -quiet-heartbeat, nothing else changes (0: skip)")
	flag.DurationVar(&o.quietHeartbeat, "quiet-heartbeat", 0, "how often each agent renews its Lease in the quiet fleet; 0: the heartbeat the hub publishes (status.pacing.heartbeatInterval of a summary the aggregation wrote), as the agents keep it (1m: the agent's own default)")
	flag.StringVar(&o.quietWrite, "quiet-write", "apply", "how renewals are written in the quiet fleet, one window each, comma-separated: apply (server-side apply, as the agent does), merge-patch (renewTime alone), update (kubelet's way)")
	flag.DurationVar(&o.busy, "busy", 3*time.Minute, "how long the virtual scenario's busy fleet runs: every cluster's results change each -busy-every (0: skip)")
	flag.DurationVar(&o.busyEvery, "busy-every", 10*time.Second, "how often each cluster's results change in the busy fleet")
	flag.StringVar(&o.busyMoves, "busy-moves", "fail", "which count the busy fleet's rounds move: fail (every cluster's violations change every round: the worst case, each shown in the slices) or pass (pod churn that passes: the hub writes nothing for it, so no latency is measured)")
	flag.Float64Var(&o.busyFailShare, "busy-fail-share", 1, "with -busy-moves fail, the share of the clusters (0..1) whose fail count each round moves, in turn (each cluster's every 1/share rounds); the others' pass count moves (pod churn). 1: every cluster's fail count every round")
	flag.BoolVar(&o.busyPaced, "busy-paced", false, "in the busy fleet, every cluster's agent schedules its own pushes (push.Pusher.PushSummary, keeping the pacing the hub publishes: urgent changes from a reserve, others at the share) instead of writing every round: what the pacing spares the hub")
	flag.IntVar(&o.cliClusters, "cli-clusters", 10000, "clusters of the cli scenario's FleetPolicy: its ClusterStatusSlices are written by the benchmark and `kubectl policyhub status` is timed reading them")
	flag.IntVar(&o.setMembers, "set-members", 100, "members of the sets scenario's PolicySet (at most 500, a PolicySet's source limit): small ClusterPolicies as -policies places, declared first as this many FleetPolicies, then as the set's members, so the two compare one to one (-policies does not apply to the sets scenario)")
	flag.IntVar(&o.replicaClusters, "replica-clusters", 3000, "cluster names of the replicas scenario: -replicas hub replicas share them (after one replica on a third of them, the baseline)")
	flag.IntVar(&o.replicas, "replicas", 3, "hub replicas of the replicas scenario, sharing the fleet (--share-fleet)")
	flag.Var(&o.leasePerName, "lease-per-name", fmt.Sprintf("give every cluster name its own sync Lease through an in-process relay in front of the real apiservers (a real cluster has one; the names of one apiserver otherwise share it, and take turns); default: on for the replicas scenario from %d names, off elsewhere", leasePerNameFrom))
	flag.BoolVar(&o.replicaBaseline, "replica-baseline", true, "in the replicas scenario, first converge one replica on a third of the names (the baseline)")
	flag.BoolVar(&o.replicaKill, "replica-kill", true, "in the replicas scenario, once converged, SIGKILL the replica working the most and change a FleetPolicy at once (skipped when the replicas did not converge)")
	flag.BoolVar(&o.replicaSummaries, "replica-summaries", false, "in the replicas scenario, once converged, write an agent's summary for every name (30 policies, 10 violations) and measure how the replicas label and cache them, before the kill; on 2 cores this saturates the hub's apiserver for minutes")
	flag.StringVar(&o.logDir, "log-dir", "", "directory for the hubs' logs (default: a new directory under $TMPDIR, kept and printed)")
	flag.StringVar(&o.profileDir, "profile", "", "directory for the hubs' pprof profiles: heap and goroutines once settled, CPU over the first 30 s of converging and of the no-op resync, and the first 60 s of the aggregation (none when empty)")
	flag.Parse()
	// The informers' clients log through controller-runtime's logger; their warnings are not results.
	ctrllog.SetLogger(logr.Discard())
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "scalebench: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scalebench: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// inParallel runs work(i) for i in [0, count), n at a time, and returns the errors joined: a
// scenario's setup or writes that fail for some names and not others say which.
func inParallel(n, count int, work func(i int) error) error {
	return errors.Join(benchkit.InParallel(n, count, work)...)
}

// bench is one run: the fleet, the hub binary, and what every scenario measured.
type bench struct {
	o        options
	f        *fleet.Fleet
	hubBin   string
	logDir   string
	hub      client.Client
	informer cache.Cache
	fleetPIDs
	scenarios map[string]bool

	idle     hubState // the hub with no cluster and no FleetPolicy
	trackers map[string]*tracker
	results  []*result
	cli      *result // the cli scenario
	sets     *setsResult
	// replicasRes is the replicas scenario's.
	replicasRes *replicasResult
	notes       []string
	relayState
}

func run(o options) error {
	ctx := context.Background()
	scenarios := map[string]bool{}
	for _, s := range strings.Split(o.only, ",") {
		switch s = strings.TrimSpace(s); s {
		case "real", "virtual", "cli", "sets", "replicas":
			scenarios[s] = true
		case "dark":
			scenarios["dark"], scenarios["virtual"] = true, true
		case "":
		default:
			return fmt.Errorf("-only: unknown scenario %q (real, virtual, dark, cli, sets, replicas)", s)
		}
	}
	if o.real < 1 || o.policies < 1 || ((scenarios["virtual"] || scenarios["sets"]) && o.virtual < 1) || (scenarios["cli"] && o.cliClusters < 1) {
		return errors.New("-real, -policies, -virtual and -cli-clusters must be positive")
	}
	if scenarios["replicas"] && (o.replicas < 2 || o.replicaClusters < o.replicas) {
		return errors.New("-replicas must be at least 2, and -replica-clusters at least -replicas")
	}
	if scenarios["sets"] && (o.setMembers < 1 || o.setMembers > maxSetMembers) {
		return fmt.Errorf("-set-members must be between 1 and %d (a PolicySet's source holds at most %d policies)", maxSetMembers, maxSetMembers)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	b := &bench{o: o, scenarios: scenarios, trackers: map[string]*tracker{}}
	if b.logDir = o.logDir; b.logDir == "" {
		if b.logDir, err = os.MkdirTemp("", "scalebench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return err
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	logf("building cmd/policyhub-hub from the working tree...")
	if b.hubBin, err = buildHub(root, b.logDir); err != nil {
		return err
	}
	commit := gitDescribe(root)

	k, note := clustersThatFit(o.real)
	if note != "" {
		b.notes = append(b.notes, note)
		logf("%s", note)
	}
	for {
		logf("starting a fleet of %d managed clusters (policyhub's CRDs on the hub, Kyverno's ClusterPolicy CRD in the clusters, no Kyverno)...", k)
		startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		b.f, err = fleet.Start(startCtx, fleet.Options{Managed: managedClusters(k), MinimalCRDs: true})
		cancel()
		if err == nil {
			break
		}
		if k < 2 {
			return err
		}
		note := fmt.Sprintf("a fleet of %d managed clusters did not start (%v); started %d instead", k, err, k/2)
		b.notes = append(b.notes, note)
		logf("%s", note)
		k /= 2
	}
	defer b.f.Stop()
	defer func() {
		if b.relay != nil {
			b.relay.close()
		}
	}()
	logf("fleet ready; fleet logs in %s, hub logs in %s", b.f.LogDir, b.logDir)
	if err := b.setup(ctx); err != nil {
		return err
	}

	if err := b.measureIdle(ctx); err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{{"real", b.runReal}, {"virtual", b.runVirtual}, {"dark", b.runDark}, {"cli", b.runCLI}, {"sets", b.runSets}, {"replicas", b.runReplicas}} {
		if !scenarios[s.name] {
			continue
		}
		if err := s.run(ctx); err != nil {
			// What the earlier scenarios measured is still worth printing.
			b.print(commit)
			return err
		}
	}
	b.print(commit)
	return nil
}

// managedClusters are the real clusters, all labelled for the real scenario's placement.
func managedClusters(k int) []fleet.ManagedCluster {
	var out []fleet.ManagedCluster
	for i := 1; i <= k; i++ {
		out = append(out, fleet.ManagedCluster{Name: fmt.Sprintf("cluster-%d", i), Labels: map[string]string{setLabel: "real"}})
	}
	return out
}

// setLabel is the cluster label every scenario's placement selects on.
const setLabel = "bench-set"

// clustersThatFit is how many kube-apiservers the machine's available memory holds (≈ 0.5 GiB
// each, the top of what FIELD-NOTES measured, after 6 GiB for the hub at a thousand clusters,
// etcd, the gateway, the hub apiserver and this process).
func clustersThatFit(want int) (int, string) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return want, ""
	}
	var availKB int64
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				availKB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	avail := float64(availKB) / (1 << 20) // GiB
	fit := int((avail - 6) / 0.5)
	if avail == 0 || fit >= want {
		return want, ""
	}
	fit = max(fit, 1)
	return fit, fmt.Sprintf("-real %d asked, but %.1f GiB available holds %d kube-apiservers (0.5 GiB each, 6 GiB kept for the rest): started %d", want, avail, fit, fit)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the policyhub module (no go.mod found above the working directory)")
		}
		dir = parent
	}
}

// gitDescribe names the commit the hub was built from, and whether hub/, cmd/ or apis/ had
// uncommitted changes (the binary is built from the working tree).
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return root + " (not a git checkout: no commit known)"
	}
	desc := strings.TrimSpace(string(out))
	status, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--", "hub", "cmd", "apis").Output()
	if n := len(bytes.Split(bytes.TrimSpace(status), []byte("\n"))); len(bytes.TrimSpace(status)) > 0 {
		desc += fmt.Sprintf(" + %d uncommitted file(s) in hub/, cmd/, apis/", n)
	}
	return desc
}

// setup makes the hub client and the FleetPolicy informer the scenarios watch statuses with.
func (b *bench) setup(ctx context.Context) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	cfg := rest.CopyConfig(b.f.Hub.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	var err error
	if b.hub, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if b.informer, err = cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{}}); err != nil {
		return err
	}
	if _, err := b.informer.GetInformer(ctx, &policyhubv1.ClusterStatusSlice{}); err != nil {
		return err
	}
	if _, err := b.informer.GetInformer(ctx, &policyhubv1.FleetPolicy{}); err != nil {
		return err
	}
	go func() { _ = b.informer.Start(ctx) }()
	if !b.informer.WaitForCacheSync(ctx) {
		return errors.New("FleetPolicy informer did not sync")
	}
	return b.findFleetPIDs()
}

// fleetPIDs are the fleet's processes, found among this process's children.
type fleetPIDs struct {
	hubAPIServer, gateway, etcd int
	managedAPIServers           []int
}

func (b *bench) findFleetPIDs() error {
	children, err := procstat.Children(os.Getpid())
	if err != nil {
		return err
	}
	for _, pid := range children {
		args := procstat.Cmdline(pid)
		if len(args) == 0 {
			continue
		}
		switch filepath.Base(args[0]) {
		case "kube-apiserver":
			if slices.Contains(args, "--etcd-prefix=/hub") {
				b.hubAPIServer = pid
			} else {
				b.managedAPIServers = append(b.managedAPIServers, pid)
			}
		case "cluster-gateway":
			b.gateway = pid
		case "etcd":
			b.etcd = pid
		}
	}
	if b.hubAPIServer == 0 || b.gateway == 0 || b.etcd == 0 || len(b.managedAPIServers) != len(b.f.Managed) {
		return fmt.Errorf("fleet processes not found among this process's children: hub apiserver %d, gateway %d, etcd %d, managed apiservers %d of %d",
			b.hubAPIServer, b.gateway, b.etcd, len(b.managedAPIServers), len(b.f.Managed))
	}
	return nil
}

// Parts of the machine the CPU and memory tables show.
const (
	partHub          = "policyhub-hub"
	partHubAPIServer = "hub kube-apiserver"
	partGateway      = "cluster-gateway"
	partManaged      = "managed kube-apiservers"
	partEtcd         = "etcd"
	partBench        = "scalebench"
)

var parts = []string{partHub, partHubAPIServer, partGateway, partManaged, partEtcd, partBench}

// snapshot reads the CPU seconds and RSS of every part (the hub: h's process).
func (b *bench) snapshot(h *hubProc) map[string]procstat.Totals {
	groups := []procstat.Group{
		{Name: partHubAPIServer, PIDs: []int{b.hubAPIServer}},
		{Name: partGateway, PIDs: []int{b.gateway}},
		{Name: partManaged, PIDs: b.managedAPIServers},
		{Name: partEtcd, PIDs: []int{b.etcd}},
		{Name: partBench, PIDs: []int{os.Getpid()}},
	}
	if h != nil {
		groups = append(groups, procstat.Group{Name: partHub, PIDs: []int{h.pid}})
	}
	return procstat.Sum(groups)
}

// cpuBetween is the CPU seconds each part spent between two snapshots.
func cpuBetween(before, after map[string]procstat.Totals) map[string]float64 {
	out := map[string]float64{}
	for part, a := range after {
		out[part] = a.CPU - before[part].CPU
	}
	return out
}

func mib(bytes float64) string { return fmt.Sprintf("%.0f MiB", bytes/(1<<20)) }

// fmtDur prints a measured duration, or "not reached in X" when the wait timed out.
func fmtDur(d time.Duration, ok bool, timeout time.Duration) string {
	if !ok {
		return "not reached in " + timeout.String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// goMaxProcs is here so the header can say how many cores the machine has.
func cores() int { return goruntime.NumCPU() }
