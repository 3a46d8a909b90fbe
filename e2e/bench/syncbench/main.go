// Command syncbench measures how fast policies reach a fleet and what it costs the clusters, on a
// local fleet, in one run: policyhub's hub controller against (a) a loop running `kubectl apply`
// once per policy per cluster (how Fairwinds' policy sync works) and (b) a bare client-go
// server-side-apply loop with the same parallelism (the ceiling). Then a resync with nothing
// changed, for each. Requests are counted where they land: each managed kube-apiserver's own
// apiserver_request_total. It prints a Markdown table; `make bench-sync` runs it.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
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

// cost is what a run cost the managed clusters.
type cost struct {
	duration         time.Duration
	requests, writes float64            // all requests; accepted mutating requests that were not dry-run, Leases aside
	changed          int                // objects whose resourceVersion changed (no-op runs)
	leases           int                // clusters whose policyhub sync Lease was written
	cpu              map[string]float64 // CPU seconds by part of the fleet
}

// cpuTotal is the CPU seconds of every part of the fleet together.
func (c cost) cpuTotal() float64 {
	total := 0.0
	for _, v := range c.cpu {
		total += v
	}
	return total
}

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 4, "managed clusters")
	flag.IntVar(&o.policies, "policies", 200, "policies (FleetPolicies), each placed in every cluster")
	flag.IntVar(&o.parallel, "parallel", 8, "requests in flight per cluster for the loops; FleetPolicies reconciled at once for policyhub")
	flag.BoolVar(&o.kyverno, "kyverno", false, "run real Kyverno in the clusters (its admission of every policy is then part of the cost)")
	flag.StringVar(&o.only, "only", "", "run only these methods, comma-separated: plain, ceiling, kubectl, policyhub (for profiling; the comparison needs all), and, named only, watched (the ceiling's loop with a watch cache of ClusterPolicies open in every cluster, as policyhub keeps) kubectl-serial (the kubectl loop, one apply at a time) and floor (the ceiling's loop plus each FleetPolicy's creation, status write and Event on the hub, with no controller: the least a hub with status and Events can spend)")
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
		managed = append(managed, fleet.ManagedCluster{Name: fmt.Sprintf("cluster-%d", i), Labels: map[string]string{"env": "bench"}, Kyverno: o.kyverno})
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
		{"floor: the ceiling's loop + each FleetPolicy's creation, status and Event, no controller", "floor", b.floor},
	}
	var rows []row
	for _, m := range methods {
		optIn := m.prefix == "watched" || m.prefix == "kubectl-serial" || m.prefix == "floor"
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

// row is one method's runs: [0] converging, [1] the no-op resync.
type row struct {
	name, prefix string
	objects      int
	runs         [][2]cost
}

// median is the run with the median convergence time (the lower middle of an even count): a
// whole run, so its columns stay consistent with each other.
func (r row) median() [2]cost {
	runs := slices.Clone(r.runs)
	slices.SortFunc(runs, func(a, b [2]cost) int { return int(a[0].duration - b[0].duration) })
	return runs[(len(runs)-1)/2]
}

func printTables(o options, rows []row) {
	fmt.Printf("\n%d managed clusters × %d policies = %d objects; parallelism %d; Kyverno %v; rounds %d (each row: the run of median convergence)\n\n",
		o.clusters, o.policies, o.clusters*o.policies, o.parallel, o.kyverno, max(o.count, 1))
	fmt.Println("| method | converge | objects/s | requests | writes | no-op resync: time | requests | writes | objects changed | sync Leases written |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		m := r.median()
		apply, noop := m[0], m[1]
		fmt.Printf("| %s | %s | %.0f | %.0f | %.0f | %s | %.0f | %.0f | %d | %d |\n", r.name,
			apply.duration.Round(10*time.Millisecond), float64(r.objects)/apply.duration.Seconds(), apply.requests, apply.writes,
			noop.duration.Round(10*time.Millisecond), noop.requests, noop.writes, noop.changed, noop.leases)
	}
	fmt.Printf("\nCPU seconds spent while converging (the machine has %d cores):\n\n", goruntime.NumCPU())
	parts := []string{"managed kube-apiservers", "hub kube-apiserver", "cluster-gateway", "etcd", "syncbench (hub controller, clients)", "kubectl"}
	fmt.Println("| method | " + strings.Join(parts, " | ") + " | total |")
	fmt.Println("|---|" + strings.Repeat("---|", len(parts)+1))
	for _, r := range rows {
		m := r.median()[0]
		line := "| " + r.name + " |"
		for _, p := range parts {
			line += fmt.Sprintf(" %.1f |", m.cpu[p])
		}
		fmt.Printf("%s %.1f |\n", line, m.cpuTotal())
	}
	if len(rows[0].runs) > 1 {
		fmt.Println("\nEvery round (convergence, CPU seconds in all):")
		for i := range rows[0].runs {
			line := fmt.Sprintf("round %d:", i+1)
			for _, r := range rows {
				line += fmt.Sprintf(" %s %s (%.1f CPU-s);", r.prefix, r.runs[i][0].duration.Round(10*time.Millisecond), r.runs[i][0].cpuTotal())
			}
			fmt.Println(strings.TrimSuffix(line, ";"))
		}
	}
	byPrefix := map[string]row{}
	for _, r := range rows {
		byPrefix[r.prefix] = r
	}
	plain, ceiling, kubectl := byPrefix["plain"], byPrefix["ceiling"], byPrefix["kubectl"]
	if ceiling.runs == nil || kubectl.runs == nil {
		return
	}
	ratios := func(i int, hub time.Duration) string {
		at := func(r row) time.Duration {
			if i < 0 {
				return r.median()[0].duration
			}
			return r.runs[i][0].duration
		}
		s := fmt.Sprintf("%.1f× faster than the kubectl loop; %.0f%% of the ceiling's throughput",
			at(kubectl).Seconds()/hub.Seconds(), 100*at(ceiling).Seconds()/hub.Seconds())
		if plain.runs != nil {
			s += fmt.Sprintf(" (%.0f%% of the plain policies' loop)", 100*at(plain).Seconds()/hub.Seconds())
		}
		return s
	}
	for _, name := range []string{"policyhub", "floor"} {
		r, ok := byPrefix[name]
		if !ok {
			continue
		}
		fmt.Println()
		if len(r.runs) > 1 {
			for i, run := range r.runs {
				fmt.Printf("round %d: %s %s\n", i+1, name, ratios(i, run[0].duration))
			}
		}
		changed := 0
		for _, run := range r.runs {
			changed = max(changed, run[1].changed)
		}
		fmt.Printf("medians: %s %s; at most %d objects changed by its no-op resyncs\n", name, ratios(-1, r.median()[0].duration), changed)
	}
}

type bench struct {
	o        options
	f        *fleet.Fleet
	profiles int // apiserver profiles taken, to name them
	runs     int // measured runs profiled (-cpuprofile), to name them
}

// profileSelf profiles this process into the -cpuprofile directory until the returned stop.
func (b *bench) profileSelf(prefix string) (stop func(), err error) {
	if b.o.cpuProfile == "" {
		return func() {}, nil
	}
	b.runs++
	out, err := os.Create(filepath.Join(b.o.cpuProfile, fmt.Sprintf("%s-%d-syncbench.prof", prefix, b.runs)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}, nil
}

// policy is the i-th benchmark ClusterPolicy named prefix-i.
func policy(prefix string, i int) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(template(i)), &obj.Object); err != nil {
		panic(err)
	}
	obj.SetName(fmt.Sprintf("%s-%d", prefix, i))
	obj.SetLabels(map[string]string{"bench": prefix})
	return obj
}

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

// measure runs fn and returns what it cost the managed clusters.
func (b *bench) measure(prefix string, fn func() error) (cost, error) {
	before, err := b.requests()
	if err != nil {
		return cost{}, err
	}
	versions, err := b.versions(prefix)
	if err != nil {
		return cost{}, err
	}
	leases, err := b.leaseVersions()
	if err != nil {
		return cost{}, err
	}
	var counts [2]map[string]float64
	if b.o.breakdown {
		if counts[0], counts[1], err = b.fleetRequestCounts(); err != nil {
			return cost{}, err
		}
	}
	cpu, err := cpuByPart()
	if err != nil {
		return cost{}, err
	}
	profiled := b.profileAPIServers(prefix)
	stopProfile, err := b.profileSelf(prefix)
	if err != nil {
		return cost{}, err
	}
	start := time.Now()
	if err := fn(); err != nil {
		stopProfile()
		return cost{}, err
	}
	c := cost{duration: time.Since(start)}
	stopProfile()
	if err := profiled(); err != nil {
		return cost{}, err
	}
	if b.o.breakdown {
		var now [2]map[string]float64
		if now[0], now[1], err = b.fleetRequestCounts(); err != nil {
			return cost{}, err
		}
		printBreakdown(prefix, counts, now)
	}
	if c.cpu, err = cpuSince(cpu); err != nil {
		return cost{}, err
	}
	after, err := b.requests()
	if err != nil {
		return cost{}, err
	}
	c.requests, c.writes = after[0]-before[0], after[1]-before[1]
	now, err := b.versions(prefix)
	if err != nil {
		return cost{}, err
	}
	for k, v := range versions {
		if now[k] != v {
			c.changed++
		}
	}
	leasesNow, err := b.leaseVersions()
	if err != nil {
		return cost{}, err
	}
	for k, v := range leasesNow {
		if leases[k] != v {
			c.leases++
		}
	}
	return c, nil
}

// leaseVersions maps cluster → resourceVersion of its policyhub sync Lease ("" when absent).
func (b *bench) leaseVersions() (map[string]string, error) {
	out := map[string]string{}
	for _, c := range b.f.Managed {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return nil, err
		}
		lease, err := cs.CoordinationV1().Leases(work.LeaseNamespace).Get(context.Background(), work.LeaseName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out[c.Name] = ""
		case err != nil:
			return nil, err
		default:
			out[c.Name] = lease.ResourceVersion
		}
	}
	return out, nil
}

// requests sums, over the managed apiservers, every request and the accepted mutating ones
// except Leases': every kube-apiserver renews its own identity Lease every 10 s, which would
// show up as writes in a quiet run. Writes of policyhub's sync Lease are counted apart (leases).
func (b *bench) requests() ([2]float64, error) {
	var total [2]float64
	for _, c := range b.f.Managed {
		counts, err := scanRequests(c)
		if err != nil {
			return total, err
		}
		for _, rc := range counts {
			total[0] += rc.value
			l := rc.labels
			write := slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE"}, l["verb"])
			if write && l["resource"] != "leases" && l["dry_run"] == "" && strings.HasPrefix(l["code"], "2") {
				total[1] += rc.value
			}
		}
	}
	return total, nil
}

// versions maps cluster/name → resourceVersion of the benchmark's objects named prefix-*.
func (b *bench) versions(prefix string) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range b.f.Managed {
		cl, err := client.New(c.Config, client.Options{})
		if err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("kyverno.io/v1")
		list.SetKind("ClusterPolicyList")
		if err := cl.List(context.Background(), list); err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			if strings.HasPrefix(item.GetName(), prefix+"-") {
				out[c.Name+"/"+item.GetName()] = item.GetResourceVersion()
			}
		}
	}
	return out, nil
}

// oneAtATime runs work for every policy in every cluster, one after the other.
func (b *bench) oneAtATime(work func(cluster string, i int) error) error {
	for _, c := range b.f.Managed {
		for i := range b.o.policies {
			if err := work(c.Name, i); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// perCluster runs work(cluster, i) for every policy i in every cluster, b.o.parallel at a time per
// cluster, the clusters at once.
func (b *bench) perCluster(work func(cluster string, i int) error) error {
	errs := make([]error, len(b.f.Managed))
	var wg sync.WaitGroup
	for k, c := range b.f.Managed {
		wg.Go(func() {
			if err := inParallel(b.o.parallel, b.o.policies, func(i int) error { return work(c.Name, i) }); err != nil {
				errs[k] = fmt.Errorf("%s: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// plainPolicy is the i-th policy as a policy file would hold it (what the kubectl loop applies).
func plainPolicy(prefix string, i int) (*unstructured.Unstructured, error) {
	return policy(prefix, i), nil
}

// renderedPolicy is the i-th policy as policyhub writes it: rendered from a FleetPolicy, with
// the ownership labels and annotations (content hash, source) every object of policyhub carries.
// Writing those costs the clusters more than writing plain policies (bigger objects and managed
// fields), so the ceiling for policyhub's work is a bare loop writing these same objects.
func renderedPolicy(prefix string, i int) (*unstructured.Unstructured, error) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
	if err := yaml.Unmarshal([]byte(template(i)), &fp.Spec.Template); err != nil {
		return nil, err
	}
	// Another hub id than the policyhub run's: these objects are never policyhub's to prune.
	return render.FleetPolicy(hubID+"-ceiling", fp, nil)
}

// ssaLoop applies the objects objectFor makes, -parallel at a time per cluster, with a bare
// client (no throttling, no reads): the fastest these writes go through the same gateway.
func (b *bench) ssaLoop(objectFor func(prefix string, i int) (*unstructured.Unstructured, error), watched bool) func(ctx context.Context, prefix string) (cost, cost, error) {
	return func(ctx context.Context, prefix string) (cost, cost, error) {
		pass, stop, err := b.ssaPass(ctx, prefix, objectFor, watched)
		if err != nil {
			return cost{}, cost{}, err
		}
		defer stop()
		apply, err := b.measure(prefix, pass)
		if err != nil {
			return cost{}, cost{}, err
		}
		noop, err := b.measure(prefix, pass)
		return apply, noop, err
	}
}

// ssaPass prepares the SSA loop's clients and objects (and, when watched, a watch cache in every
// cluster, kept until stop) and returns one pass of the loop over every policy and cluster.
func (b *bench) ssaPass(ctx context.Context, prefix string, objectFor func(prefix string, i int) (*unstructured.Unstructured, error), watched bool) (pass func() error, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	clients := map[string]client.Client{}
	for _, c := range b.f.Managed {
		cfg, err := gateway.ClusterConfig(b.f.Hub.Config, c.Name)
		if err != nil {
			return nil, stop, err
		}
		cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the clusters, not the limiter
		if clients[c.Name], err = client.New(cfg, client.Options{}); err != nil {
			return nil, stop, err
		}
		if watched {
			cancel, err := watchClusterPolicies(ctx, cfg)
			if err != nil {
				return nil, stop, fmt.Errorf("%s: %w", c.Name, err)
			}
			stops = append(stops, cancel)
		}
	}
	objects := make([]*unstructured.Unstructured, b.o.policies)
	for i := range objects {
		if objects[i], err = objectFor(prefix, i); err != nil {
			return nil, stop, err
		}
	}
	pass = func() error {
		return b.perCluster(func(cluster string, i int) error {
			return clients[cluster].Apply(ctx, client.ApplyConfigurationFromUnstructured(objects[i].DeepCopy()), client.FieldOwner("bench-ssa"), client.ForceOwnership)
		})
	}
	return pass, stop, nil
}

// watchClusterPolicies keeps a watch cache of the cluster's ClusterPolicies, through the gateway,
// until stopped: the watch policyhub's sync keeps, without the rest of policyhub.
func watchClusterPolicies(ctx context.Context, cfg *rest.Config) (stop func(), err error) {
	c, err := cache.New(cfg, cache.Options{DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	policies := &unstructured.Unstructured{}
	policies.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	if _, err := c.GetInformer(ctx, policies); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("ClusterPolicy watch cache did not sync")
	}
	return cancel, nil
}

// kubectlLoop runs `kubectl apply` once per policy per cluster: as many at once as the other
// loops, or one at a time when serial.
func (b *bench) kubectlLoop(serial bool) func(ctx context.Context, prefix string) (cost, cost, error) {
	return func(ctx context.Context, prefix string) (cost, cost, error) {
		kubectl, err := fleet.KubectlPath()
		if err != nil {
			return cost{}, cost{}, err
		}
		dir, err := os.MkdirTemp(b.f.Dir, "kubectl-")
		if err != nil {
			return cost{}, cost{}, err
		}
		kubeconfigs := map[string]string{}
		for _, c := range b.f.Managed {
			if kubeconfigs[c.Name], err = b.f.GatewayKubeconfig(c.Name); err != nil {
				return cost{}, cost{}, err
			}
		}
		for i := range b.o.policies {
			data, err := yaml.Marshal(policy(prefix, i).Object)
			if err != nil {
				return cost{}, cost{}, err
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), data, 0o644); err != nil {
				return cost{}, cost{}, err
			}
		}
		each := b.perCluster
		if serial {
			each = b.oneAtATime
		}
		loop := func() error {
			return each(func(cluster string, i int) error {
				cmd := exec.CommandContext(ctx, kubectl, "apply", "-f", filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), "--kubeconfig", kubeconfigs[cluster])
				cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(dir, "cache"))
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("kubectl apply: %v: %s", err, out)
				}
				return nil
			})
		}
		apply, err := b.measure(prefix, loop)
		if err != nil {
			return cost{}, cost{}, err
		}
		noop, err := b.measure(prefix, loop)
		return apply, noop, err
	}
}

func (b *bench) policyhub(ctx context.Context, prefix string) (cost, cost, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	hubCfg := rest.CopyConfig(b.f.Hub.Config)
	hubCfg.QPS, hubCfg.Burst = -1, 0
	mgr, err := ctrl.NewManager(hubCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      controllers.CacheOptions(b.f.SecretNamespace), Client: controllers.ClientOptions(),
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	registry := prometheus.NewRegistry()
	workers, err := controllers.SetupHub(mgr, controllers.HubOptions{
		Gateway: hubCfg, SecretNamespace: b.f.SecretNamespace, HubID: hubID,
		Lock: work.LockOptions{Identity: hubID + "/bench"}, Registry: registry, Resync: time.Hour,
		MaxConcurrentReconciles: 8,
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	defer workers.Close() // its watch caches would weigh on the next round
	mgrCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = mgr.Start(mgrCtx) }()
	// The manager's cached client: reading FleetPolicies back costs the hub nothing.
	hub := mgr.GetClient()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return cost{}, cost{}, fmt.Errorf("hub cache did not sync")
	}

	// A hub runs before policies are declared: let it see the clusters first (one FleetPolicy
	// synced everywhere, then deleted), so the clock measures syncing, not the hub's start.
	warmup, err := fleetPolicy("warmup", -1)
	if err != nil {
		return cost{}, cost{}, err
	}
	if err := hub.Create(ctx, warmup); err != nil {
		return cost{}, cost{}, err
	}
	if err := b.waitSynced(ctx, mgr.GetCache(), []string{"warmup"}); err != nil {
		return cost{}, cost{}, err
	}
	if err := hub.Delete(ctx, warmup); err != nil {
		return cost{}, cost{}, err
	}
	if err := b.waitGone(ctx, hub, "warmup"); err != nil {
		return cost{}, cost{}, err
	}

	var names []string
	for i := range b.o.policies {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	apply, err := b.measure(prefix, func() error {
		// The FleetPolicies are created as fast as the loops send (-parallel at a time); the clock
		// runs from the first creation to the last cluster synced.
		err := inParallel(b.o.parallel, len(names), func(i int) error {
			fp, err := fleetPolicy(names[i], i)
			if err != nil {
				return err
			}
			return hub.Create(ctx, fp)
		})
		if err != nil {
			return err
		}
		return b.waitSynced(ctx, mgr.GetCache(), names)
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	// A resync of every FleetPolicy with nothing changed: touch an annotation (it triggers a
	// reconcile, as the resync timer would) and wait until each reconcile has run.
	noop, err := b.measure(prefix, func() error {
		start := unchangedCount(registry)
		for _, name := range names {
			fp := &policyhubv1.FleetPolicy{}
			if err := hub.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
				return err
			}
			patch := client.MergeFrom(fp.DeepCopy())
			fp.SetAnnotations(map[string]string{"bench/resync": "1"})
			if err := hub.Patch(ctx, fp, patch); err != nil {
				return err
			}
		}
		return b.waitUnchanged(registry, start+float64(len(names)*b.o.clusters))
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	// Leave the hub as the round found it: a next round's hub would otherwise resync these too.
	for _, name := range names {
		if err := hub.Delete(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return cost{}, cost{}, err
		}
	}
	for _, name := range names {
		if err := b.waitGone(ctx, hub, name); err != nil {
			return cost{}, cost{}, err
		}
	}
	return apply, noop, nil
}

// inParallel runs work(i) for i in [0, count), n at a time, and returns the first error.
func inParallel(n, count int, work func(i int) error) error {
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range next {
				if err := work(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
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
	return first
}

// fleetPolicy is the benchmark's i-th FleetPolicy: template(i), placed in every cluster.
func fleetPolicy(name string, i int) (*policyhubv1.FleetPolicy, error) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "bench"}}
	if err := yaml.Unmarshal([]byte(template(i)), &fp.Spec.Template); err != nil {
		return nil, err
	}
	return fp, nil
}

// waitSynced waits until every FleetPolicy named is Synced in every cluster. It is told by the
// hub cache's informer rather than polling the cache, so the clock stops as the last status
// arrives, not up to a polling interval later (the loops' clocks stop as their last write returns).
func (b *bench) waitSynced(ctx context.Context, informers cache.Informers, names []string) error {
	informer, err := informers.GetInformer(ctx, &policyhubv1.FleetPolicy{})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true // not another round's, nor the warmup's
	}
	var mu sync.Mutex
	synced := map[string]bool{}
	all := make(chan struct{})
	check := func(obj any) {
		fp, ok := obj.(*policyhubv1.FleetPolicy)
		if !ok || !want[fp.Name] || fp.Status.ObservedGeneration != fp.Generation {
			return
		}
		n := 0
		for _, c := range fp.Status.Clusters {
			if c.Phase == policyhubv1.ClusterPhaseSynced {
				n++
			}
		}
		if n != b.o.clusters {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !synced[fp.Name] {
			synced[fp.Name] = true
			if len(synced) == len(want) {
				close(all)
			}
		}
	}
	registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = informer.RemoveEventHandler(registration) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Minute):
		return fmt.Errorf("not converged within 30 minutes")
	}
}

// waitGone polls until the FleetPolicy is deleted (its finalizer pruned the clusters).
func (b *bench) waitGone(ctx context.Context, hub client.Client, name string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, &policyhubv1.FleetPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("FleetPolicy %s not deleted within 5 minutes", name)
}

// unchangedCount is the hub's count of objects a sync found unchanged, over all clusters.
func unchangedCount(registry *prometheus.Registry) float64 {
	families, _ := registry.Gather()
	total := 0.0
	for _, f := range families {
		if f.GetName() == "policyhub_sync_operations_total" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "action" && l.GetValue() == "unchanged" {
						total += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return total
}

// waitUnchanged polls the hub's metrics until its unchanged count reaches n.
func (b *bench) waitUnchanged(registry *prometheus.Registry, n float64) error {
	deadline := time.Now().Add(30 * time.Minute)
	for unchangedCount(registry) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("no-op resync did not finish: %v of %v", unchangedCount(registry), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
