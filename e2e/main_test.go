package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// testFleet is the fleet every test of this package runs on: a hub running KubeVela's vela-core
// and two managed clusters, each with real Kyverno 1.19 (cluster-2 reporting through
// openreports.io), a third with Kyverno 1.16 (kyverno116Cluster), a fourth with Gatekeeper and
// no Kyverno (gatekeeperCluster) and a fifth with neither (kubernetesCluster). Tests reach it through
// fleetOf, which gives a test that started a fleet of its own (useOwnFleet) that one instead.
var testFleet *fleet.Fleet

// ownFleets maps a top-level test's name to the fleet it started for itself (useOwnFleet).
var ownFleets sync.Map

// fleetOf is the fleet t's helpers work on: its top-level test's own, or the shared one.
func fleetOf(t testing.TB) *fleet.Fleet {
	top, _, _ := strings.Cut(t.Name(), "/")
	if own, ok := ownFleets.Load(top); ok {
		return own.(*fleet.Fleet)
	}
	return testFleet
}

// kyverno116Cluster is the managed cluster that runs Kyverno 1.16.
const kyverno116Cluster = "cluster-3"

// gatekeeperCluster runs Gatekeeper (fleet.GatekeeperVersion) and no Kyverno; kubernetesCluster
// runs no policy engine but the API server's own admission policies.
const (
	gatekeeperCluster = "cluster-4"
	kubernetesCluster = "cluster-5"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: -short given: the local-fleet tests do not run")
		os.Exit(0)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	f, err := fleet.Start(ctx, fleet.Options{Managed: []fleet.ManagedCluster{
		{Name: "cluster-1", Labels: map[string]string{"env": "staging"}, Kyverno: true},
		// cluster-2's reports controller writes openreports.io Reports instead of wgpolicyk8s.io
		// PolicyReports: the agent must give the same summary from either.
		{Name: "cluster-2", Labels: map[string]string{"env": "prod"}, Kyverno: true, KyvernoReportsArgs: []string{"--openreportsEnabled"}},
		// kyverno116Cluster runs Kyverno 1.16, the oldest a real fleet still runs, with its own
		// CRDs: it serves the CEL policy kinds only as v1beta1. Only the tests that name it use it.
		{Name: kyverno116Cluster, Labels: map[string]string{"kyverno": "v1.16"}, Kyverno: true, KyvernoVersion: fleet.Kyverno116Version},
		// gatekeeperCluster runs Gatekeeper and no Kyverno; kubernetesCluster neither: only the
		// API server's own admission policies. Only the tests that name them use them.
		{Name: gatekeeperCluster, Labels: map[string]string{"engine": "gatekeeper"}, Gatekeeper: true},
		{Name: kubernetesCluster, Labels: map[string]string{"engine": "kubernetes"}},
		// KubeVela's own controller runs on the hub: the KubeVela tests are against the real thing;
		// kube-controller-manager's garbage collector and namespace controller run everywhere, so
		// ownerReferences cascade and deleted namespaces finish deleting.
		// Flux's source-controller serves the Git repositories PolicySets read.
	}, KubeVela: true, ControllerManager: true, Flux: true})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start the local fleet: %v\n", err)
		os.Exit(1)
	}
	// The in-process hub controllers of the tests log next to the fleet's processes.
	hubLog, err := os.Create(filepath.Join(f.LogDir, "policyhub-hub-in-tests.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		_ = f.Stop()
		os.Exit(1)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(hubLog), zap.UseDevMode(true)))
	// Printed first, so a test that panics still tells where the processes' logs are.
	fmt.Printf("e2e: local fleet ready in %s; logs in %s\n", time.Since(start).Round(100*time.Millisecond), f.LogDir)
	testFleet = f
	code := m.Run()
	if code != 0 {
		f.Keep()
		fmt.Fprintf(os.Stderr, "e2e: tests failed; the fleet's logs are kept in %s\n", f.LogDir)
	}
	if err := f.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop the local fleet: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
