package e2e

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
)

// A cluster that leaves the fleet (its cluster-gateway credential Secret is deleted) and that no
// declaration lists any more is let go of: its worker stops, the hub stops watching it, its series
// leave the hub's /metrics, and the hub's goroutines return to what they were before it joined.
func TestHubLetsGoOfDepartedCluster(t *testing.T) {
	ctx := testContext(t)
	const departing, name = "departing", "departure-e2e"
	admin := directClient(t, fleetOf(t).Hub.Config)

	// "departing" is cluster-2 under another name: its credential Secret holds cluster-2's, so
	// the hub's watch of it shows in cluster-2's apiserver.
	cluster2 := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: fleetOf(t).SecretNamespace, Name: "cluster-2"}, cluster2); err != nil {
		t.Fatal(err)
	}
	newSecret := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: departing, Namespace: fleetOf(t).SecretNamespace,
				Labels: map[string]string{gateway.CredentialTypeLabel: cluster2.Labels[gateway.CredentialTypeLabel]}},
			Type: cluster2.Type, Data: cluster2.Data,
		}
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), newSecret()) })

	// Kyverno watches ClusterPolicies in cluster-2 too: count the watches before the hub's.
	var others float64
	eventually(t, 30*time.Second, 200*time.Millisecond, "a steady count of ClusterPolicy watches in cluster-2", func() error {
		first, second := clusterPolicyWatches(t, "cluster-2"), clusterPolicyWatches(t, "cluster-2")
		if first != second {
			return fmt.Errorf("%v, then %v", first, second)
		}
		others = first
		return nil
	})

	hub := startHub(t, time.Hour)
	reachable := map[string]string{"cluster": departing} // the series of the cluster
	// The cluster joins and leaves twice. The first time also starts what the hub starts once and
	// keeps (informers its reconciles read lazily, its event broadcasters, the test's connection
	// to its /metrics): the goroutines are counted after it, and must come back after the second.
	var baseline goroutines
	for round := 1; round <= 2; round++ {
		secret := newSecret()
		if err := admin.Create(ctx, secret); err != nil {
			t.Fatalf("round %d: create %s's credential Secret: %v", round, departing, err)
		}
		createFleetPolicy(t, `
metadata: {name: `+name+`}
spec:
  placement: {clusters: [`+departing+`]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("departure"))
		waitFleetPolicy(t, name, "synced in "+departing, wantPhases(map[string]policyhubv1.ClusterPhase{departing: policyhubv1.ClusterPhaseSynced}))
		if v, ok := hub.scrape(t, "policyhub_cluster_reachable", reachable); !ok || v != 1 {
			t.Fatalf("round %d: policyhub_cluster_reachable for %s: %v (present: %v), want 1", round, departing, v, ok)
		}
		// Once its worker is idle, one watch of the kind: this hub's objects (the names of
		// everyone's are watched only while passes create).
		eventually(t, 30*time.Second, 200*time.Millisecond, "the hub watches ClusterPolicies in "+departing, func() error {
			if n := clusterPolicyWatches(t, "cluster-2"); n != others+1 {
				return fmt.Errorf("%v ClusterPolicy watches in cluster-2, want %v", n, others+1)
			}
			return nil
		})

		// The declaration goes first (pruned from the cluster), then the cluster.
		deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if err := admin.Delete(ctx, secret); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, 200*time.Millisecond, "the hub lets go of "+departing, func() error {
			for _, metric := range []string{"policyhub_cluster_reachable", "policyhub_sync_operations_total", "policyhub_sync_duration_seconds_count"} {
				if _, ok := hub.scrape(t, metric, reachable); ok {
					return fmt.Errorf("%s still has a series for %s", metric, departing)
				}
			}
			if n := clusterPolicyWatches(t, "cluster-2"); n != others {
				return fmt.Errorf("%v ClusterPolicy watches in cluster-2, want %v (the hub's ended)", n, others)
			}
			if slices.Contains(hub.workers.Clusters(), departing) {
				return fmt.Errorf("%s still has a worker", departing)
			}
			return nil
		})
		if round == 1 {
			baseline = steadyGoroutines(t)
		}
	}
	// Nothing of the cluster keeps running: not its worker, watch cache, informers, Lease elector
	// or connections. A little slack: the test's and the hub's own connections come and go.
	eventually(t, 30*time.Second, 200*time.Millisecond, "the hub's goroutines back to before "+departing+" joined", func() error {
		now := takeGoroutines(t)
		if now.total > baseline.total+3 {
			return fmt.Errorf("%d goroutines, %d before %s joined; the stacks with more than before:\n%s", now.total, baseline.total, departing, now.more(baseline))
		}
		t.Logf("%d goroutines, %d before %s joined", now.total, baseline.total, departing)
		return nil
	})
}

// steadyGoroutines waits until the process's goroutine count has held for a while and returns
// them. A departure finishes after the test sees it (the hub checks the departed cluster once
// more a little later), so one count could be taken mid-way.
func steadyGoroutines(t *testing.T) goroutines {
	t.Helper()
	var steady goroutines
	var since time.Time
	eventually(t, 60*time.Second, 200*time.Millisecond, "a steady goroutine count", func() error {
		now := takeGoroutines(t)
		if now.total != steady.total {
			steady, since = now, time.Now()
		}
		if held := time.Since(since); held < 3*time.Second {
			return fmt.Errorf("%d goroutines for %s", now.total, held.Round(time.Millisecond))
		}
		return nil
	})
	return steady
}

// goroutines are the process's goroutines, counted by stack.
type goroutines struct {
	total int
	// stacks counts the goroutines of each stack: its frames (function and file:line), one a line.
	stacks map[string]int
}

// takeGoroutines reads the process's goroutine profile.
func takeGoroutines(t *testing.T) goroutines {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatalf("goroutine profile: %v", err)
	}
	g := goroutines{stacks: map[string]int{}}
	// debug=1 form: "<count> @ <pcs>" opens a stack, "#\t<pc>\t<func>+<off>\t<file>:<line>" are its frames.
	count, frames := 0, ""
	flush := func() {
		if count > 0 {
			g.stacks[frames] += count
			g.total += count
		}
		count, frames = 0, ""
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.Contains(line, " @ "):
			flush()
			n, err := strconv.Atoi(line[:strings.Index(line, " @ ")])
			if err != nil {
				t.Fatalf("goroutine profile line %q: %v", line, err)
			}
			count = n
		case strings.HasPrefix(line, "#\t"):
			f := strings.Fields(line)
			if len(f) >= 4 {
				fn, _, _ := strings.Cut(f[2], "+0x")
				frames += "    " + fn + " " + f[3] + "\n"
			}
		}
	}
	flush()
	return g
}

// more lists the stacks g has more goroutines in than before, most first.
func (g goroutines) more(before goroutines) string {
	type extra struct {
		n      int
		frames string
	}
	var extras []extra
	for frames, n := range g.stacks {
		if d := n - before.stacks[frames]; d > 0 {
			extras = append(extras, extra{d, frames})
		}
	}
	slices.SortFunc(extras, func(a, b extra) int { return b.n - a.n })
	var out strings.Builder
	for _, e := range extras {
		fmt.Fprintf(&out, "  %d more:\n%s", e.n, e.frames)
	}
	return out.String()
}

// clusterPolicyWatches is how many watches of ClusterPolicies a managed cluster's apiserver is
// serving (its apiserver_longrunning_requests).
func clusterPolicyWatches(t *testing.T, cluster string) float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(testContext(t))
	if err != nil {
		t.Fatalf("scrape %s's /metrics: %v", cluster, err)
	}
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") ||
			!strings.Contains(line, `resource="clusterpolicies"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += v
	}
	return total
}
