package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/work"
)

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
