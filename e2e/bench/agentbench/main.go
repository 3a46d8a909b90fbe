// Command agentbench measures policyhub-agent on a cluster holding many report results: a local
// fleet's managed kube-apiserver gets real wgpolicyk8s.io PolicyReports (one per resource, as
// Kyverno writes them, on ConfigMaps labelled with their application), then the real
// policyhub-agent binary (built from the working tree) summarizes them and pushes the summary to
// the hub. It prints Markdown tables: the agent's memory and CPU, how long a summary takes after a
// report changes, and the hub's metric series for that summary against the series
// policy-reporter's detailed and simple modes would export for the same results. `make
// bench-agent` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// Targets of issue 19.
const (
	targetRSS     = 100 << 20
	targetSummary = time.Second
	targetFewer   = 10.0
)

type options struct {
	results, perReport, namespaces, apps, parallel, changes int
	pushInterval                                            time.Duration
	profile                                                 string
}

func main() {
	var o options
	flag.IntVar(&o.results, "results", 100_000, "Report results in the cluster.")
	flag.IntVar(&o.perReport, "per-report", 10, "Results per report (policies per resource): one report per resource, as Kyverno writes them.")
	flag.IntVar(&o.namespaces, "namespaces", 100, "Namespaces the resources are spread over.")
	flag.IntVar(&o.apps, "apps", 1000, "Applications the resources belong to (by the app.oam.dev/name label).")
	flag.IntVar(&o.parallel, "parallel", 8, "Concurrent writes while filling the cluster.")
	flag.IntVar(&o.changes, "changes", 20, "Report changes timed from the write to the summary on the hub.")
	flag.DurationVar(&o.pushInterval, "push-interval", 100*time.Millisecond, "The agent's --push-interval (its default is 10s, which would be most of what is timed).")
	flag.StringVar(&o.profile, "profile", "", "If set, a folder where the agent's heap profile is saved once it has settled (agent-heap.pb.gz; go tool pprof).")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "agentbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.perReport < 1 || o.results < o.perReport || o.namespaces < 1 || o.apps < o.namespaces {
		return fmt.Errorf("want results ≥ per-report ≥ 1 and apps ≥ namespaces ≥ 1")
	}
	dir, err := os.MkdirTemp("", "agentbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	agentBin := filepath.Join(dir, "policyhub-agent")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", agentBin, "./cmd/policyhub-agent").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/policyhub-agent: %v\n%s", err, out)
	}

	progress("starting a fleet of 1 managed cluster...")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	f, err := fleet.Start(startCtx, fleet.Options{Managed: []fleet.ManagedCluster{{Name: "cluster-1"}}})
	cancel()
	if err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	defer f.Stop()
	cluster := f.Cluster("cluster-1")

	w := newWorkload(o)
	progress("writing %d resources and their %d reports (%d results)...", w.resources, w.resources, w.results())
	start := time.Now()
	if err := w.write(ctx, cluster.Config, o.parallel); err != nil {
		return err
	}
	fill := time.Since(start)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	hub, err := client.New(f.Hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, hub, cluster.Name); err != nil {
		return err
	}

	progress("starting policyhub-agent...")
	m, err := measureAgent(ctx, o, w, agentBin, f.Hub.Kubeconfig, cluster, hub)
	if err != nil {
		return err
	}
	m.fill = fill
	printTables(o, w, m)
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "agentbench: "+format+"\n", args...)
}
