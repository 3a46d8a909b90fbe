package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/hub/gateway"
)

// These tests check the harness's own promises. Kyverno is off: its behaviour is tested in e2e/.

// startTestFleet starts a fleet for the test and, once it is stopped, checks that none of its
// processes outlived it.
func startTestFleet(t *testing.T, opts Options) *Fleet {
	t.Helper()
	var f *Fleet
	// Registered first, so it runs last: after StartForTest's cleanup has stopped the fleet.
	t.Cleanup(func() {
		if f == nil {
			return
		}
		if pids := fleetProcesses(t, f.Dir); len(pids) > 0 {
			t.Errorf("processes of the fleet still running after Stop: %v", pids)
		}
	})
	f = StartForTest(t, opts)
	return f
}

// Two fleets run side by side without sharing a port or a cluster: a namespace made in one fleet's
// cluster-1 is not in the other's, and each gateway reaches its own fleet's clusters.
func TestTwoFleetsRunSideBySide(t *testing.T) {
	t.Parallel()
	fleets := make([]*Fleet, 2)
	errs := make(chan error, 2)
	for i := range fleets {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			f, err := Start(ctx, Options{Managed: []ManagedCluster{{Name: "cluster-1"}}})
			fleets[i] = f
			errs <- err
		}()
	}
	for range fleets {
		if err := <-errs; err != nil {
			t.Errorf("start fleet: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, f := range fleets {
			if f != nil {
				if err := f.Stop(); err != nil {
					t.Errorf("stop fleet: %v", err)
				}
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if fleets[0].Hub.URL == fleets[1].Hub.URL || fleets[0].GatewayURL == fleets[1].GatewayURL {
		t.Fatalf("the fleets share an address: hubs %s %s, gateways %s %s",
			fleets[0].Hub.URL, fleets[1].Hub.URL, fleets[0].GatewayURL, fleets[1].GatewayURL)
	}
	ctx := context.Background()
	direct := kubernetesClient(t, fleets[0].Managed[0].Config)
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-a-only"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		cfg, err := gateway.ClusterConfig(fleets[i].Hub.Config, "cluster-1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = kubernetesClient(t, cfg).CoreV1().Namespaces().Get(ctx, "fleet-a-only", metav1.GetOptions{})
		if got := err == nil; got != want {
			t.Errorf("fleet %d: namespace fleet-a-only through its gateway: found=%v (err %v), want found=%v", i, got, err, want)
		}
	}
}

// A managed cluster's apiserver can be stopped and started again: while it is down the gateway
// answers for it with an error and still reaches the other cluster; afterwards it is reachable
// again with its data intact.
func TestManagedAPIServerStopAndRestart(t *testing.T) {
	t.Parallel()
	f := startTestFleet(t, Options{})
	ctx := context.Background()
	down, up := f.Managed[0], f.Managed[1]
	if _, err := kubernetesClient(t, down.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := down.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := proxiedVersion(ctx, f, down.Name); err == nil {
		t.Errorf("%s answers through the gateway while its apiserver is stopped", down.Name)
	} else if !strings.Contains(err.Error(), "500") {
		t.Errorf("%s while stopped: %v, want the gateway's 500", down.Name, err)
	}
	if err := proxiedVersion(ctx, f, up.Name); err != nil {
		t.Errorf("%s through the gateway while %s is down: %v", up.Name, down.Name, err)
	}
	if err := down.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := proxiedVersion(ctx, f, down.Name); err != nil {
		t.Errorf("%s through the gateway after restart: %v", down.Name, err)
	}
	if _, err := kubernetesClient(t, down.Config).CoreV1().Namespaces().Get(ctx, "survives-restart", metav1.GetOptions{}); err != nil {
		t.Errorf("data of %s lost across the restart: %v", down.Name, err)
	}
}

// A test binary that panics with a fleet running leaves no process of the fleet behind: the
// children die with their parent (parent-death signal), although no Stop ran.
func TestProcessesDieWithAPanickingTestBinary(t *testing.T) {
	t.Parallel()
	if os.Getenv("POLICYHUB_FLEET_PANIC") == "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		f, err := Start(ctx, Options{Managed: []ManagedCluster{{Name: "cluster-1"}}})
		if err != nil {
			fmt.Println("start failed:", err)
			os.Exit(3)
		}
		fmt.Printf("FLEETDIR=%s\n", f.Dir)
		panic("deliberate panic with a running fleet")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessesDieWithAPanickingTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "POLICYHUB_FLEET_PANIC=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "deliberate panic") {
		t.Fatalf("the child test binary did not panic as planned (err %v):\n%s", err, out)
	}
	m := regexp.MustCompile(`FLEETDIR=(\S+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the child did not start its fleet:\n%s", out)
	}
	dir := m[1]
	t.Cleanup(func() {
		os.RemoveAll(dir)
		os.RemoveAll(filepath.Join("/dev/shm", filepath.Base(dir)+"-etcd"))
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := fleetProcesses(t, dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the panicked test's fleet still run: %v", pids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fleetProcesses lists the processes whose command line names the fleet's directory.
func fleetProcesses(t *testing.T, fleetDir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := fmt.Sprint(os.Getpid())
	var found []string
	for _, e := range entries {
		if e.Name() == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), filepath.Base(fleetDir)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " ")[:80])
		}
	}
	return found
}

func proxiedVersion(ctx context.Context, f *Fleet, cluster string) error {
	cfg, err := gateway.ClusterConfig(f.Hub.Config, cluster)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	_, err = getOK(ctx, httpClient, cfg.Host+"/version")
	return err
}

func kubernetesClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
