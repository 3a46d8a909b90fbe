package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// requestCount is one series of a kube-apiserver's apiserver_request_total.
type requestCount struct {
	labels map[string]string
	value  float64
}

// scanRequests reads a kube-apiserver's apiserver_request_total series.
func scanRequests(c *fleet.Cluster) ([]requestCount, error) {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Get(c.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []requestCount
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, err
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):strings.LastIndexByte(line, '}')], ",") {
			k, val, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(val, `"`)
		}
		out = append(out, requestCount{labels: labels, value: v})
	}
	return out, sc.Err()
}

// requestCounts reads a kube-apiserver's request counts keyed by verb, resource, subresource and
// dry-run: where a method's requests went, for -breakdown.
func requestCounts(c *fleet.Cluster) (map[string]float64, error) {
	counts, err := scanRequests(c)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, rc := range counts {
		l := rc.labels
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		if l["dry_run"] != "" {
			key += " (dry-run)"
		}
		out[key] += rc.value
	}
	return out, nil
}

// fleetRequestCounts reads the hub's counts and the managed clusters' counts, summed.
func (b *bench) fleetRequestCounts() (hub, managed map[string]float64, err error) {
	if hub, err = requestCounts(b.f.Hub); err != nil {
		return nil, nil, err
	}
	managed = map[string]float64{}
	for _, c := range b.f.Managed {
		counts, err := requestCounts(c)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range counts {
			managed[k] += v
		}
	}
	return hub, managed, nil
}

// printBreakdown prints, to stderr, the requests each apiserver served between before and after.
func printBreakdown(method string, before, after [2]map[string]float64) {
	for i, where := range []string{"hub kube-apiserver", "managed kube-apiservers"} {
		var keys []string
		for k, v := range after[i] {
			if v-before[i][k] >= 1 {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(x, y int) bool {
			return after[i][keys[x]]-before[i][keys[x]] > after[i][keys[y]]-before[i][keys[y]]
		})
		fmt.Fprintf(os.Stderr, "%s, %s:\n", method, where)
		for _, k := range keys {
			fmt.Fprintf(os.Stderr, "  %6.0f  %s\n", after[i][k]-before[i][k], k)
		}
	}
}

// profileAPIServers starts 5-second CPU profiles of the hub's and the first managed cluster's
// kube-apiservers when -apiserver-profiles is set; the returned func waits for them.
func (b *bench) profileAPIServers(prefix string) func() error {
	if b.o.apiserverProfiles == "" {
		return func() error { return nil }
	}
	b.profiles++
	errs := make(chan error, 2)
	for _, c := range []*fleet.Cluster{b.f.Hub, b.f.Managed[0]} {
		name := "hub"
		if c != b.f.Hub {
			name = c.Name
		}
		path := filepath.Join(b.o.apiserverProfiles, fmt.Sprintf("%s-%d-%s.prof", prefix, b.profiles, name))
		go func() { errs <- fetchProfile(c, path) }()
	}
	return func() error { return errors.Join(<-errs, <-errs) }
}

func fetchProfile(c *fleet.Cluster, path string) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return err
	}
	resp, err := hc.Get(c.URL + "/debug/pprof/profile?seconds=5")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("profile %s: %s", c.Name, resp.Status)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, resp.Body)
	return err
}
