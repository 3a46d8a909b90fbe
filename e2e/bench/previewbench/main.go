// Command previewbench measures what a preview (a FleetPolicy's spec.preview: a report-only
// shadow of a candidate in every placed cluster) costs at fleet scale: the bytes it adds to each
// agent's summary push, the hub memory of a thousand such summaries (the summary cache, and the
// metrics' copy), the preview in each cluster's ClusterStatusSlice entry and the FleetPolicy's
// status.preview, and the hub's CPU for one status pass's preview work over the fleet. It runs in process: the summaries are made by the agent's own summarize.Summarize from a
// collect.Snapshot, and the bodies its push.APIWrites would send (push.SummaryBodies),
// the shadow is rendered by the hub's declare.FleetPolicyTargets, and the clusters' preview entries
// by aggregate.ForShadows, what the engine's setPreviews calls. The CPU figures are two `go test`
// benchmarks it runs (BenchmarkSetPreviews1000 in hub/engine, BenchmarkPreviewStatus1000 in
// hub/controllers: the code is unexported); -bench=false leaves them out. The requests the hub
// sends the managed clusters for a preview are stated from the code (one shadow written per
// cluster, pruned when the preview ends), not measured: no cluster runs here. `make bench-preview`.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	"github.com/policyhub/policyhub/agent/push"
	"github.com/policyhub/policyhub/agent/summarize"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/placement"
)

func main() {
	clusters := flag.Int("clusters", 1000, "clusters in the fleet")
	policies := flag.Int("policies", 20, "policies each summary reports besides the shadow (the first is the live policy the shadow is compared with)")
	resources := flag.Int("resources", 40, "resources each cluster's policies judge")
	bench := flag.Bool("bench", true, "run the hub's CPU benchmarks (go test -bench in hub/engine and hub/controllers) and report them")
	count := flag.Int("count", 3, "go test -count of the CPU benchmarks (the table shows the range)")
	flag.Parse()
	if *policies < 1 || *resources < 30 {
		fmt.Fprintln(os.Stderr, "previewbench: -policies must be at least 1 and -resources at least 30 (the shadow names 10 newly failing resources)")
		os.Exit(2)
	}
	if err := run(*clusters, *policies, *resources, *bench, *count); err != nil {
		fmt.Fprintln(os.Stderr, "previewbench:", err)
		os.Exit(1)
	}
}

const (
	hubID      = "hub-bench"
	policyName = "require-team-label"
	// benchClusters is the fleet of the CPU benchmarks, whatever -clusters says.
	benchClusters = 1000
)

// measure is one fleet's cost: with or without the preview.
type measure struct {
	patchBytes, applyBytes int
	cacheHeap, metricsHeap uint64
	series                 int
	sliceEntryBytes        int // one cluster's ClusterStatusSlice entry, JSON
	slicesHeap             uint64
	shadowBytes            int // the summary's spec.shadows entry alone, JSON
}

func run(clusters, policies, resources int, bench bool, count int) error {
	fp := fleetPolicy()
	shadow, err := renderShadow(fp)
	if err != nil {
		return err
	}
	without, err := fleet(clusters, policies, resources, shadow, false)
	if err != nil {
		return err
	}
	with, err := fleet(clusters, policies, resources, shadow, true)
	if err != nil {
		return err
	}
	var cpu []benchResult
	if bench {
		if cpu, err = runBenchmarks(count); err != nil {
			return err
		}
	}

	mib := func(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
	perCluster := func(a, b uint64) string {
		return fmt.Sprintf("%.2f KiB", (float64(b)-float64(a))/float64(clusters)/1024)
	}
	size := func(n int) string { return comma(n) + " bytes" }
	fmt.Printf("\n`go run ./e2e/bench/previewbench -clusters %d -policies %d -resources %d`: %s clusters, each summary reporting %d policies over %d Deployments; "+
		"with the preview, each cluster also runs the shadow %s (%s, of %s), which fails %d resources the live policy passes: "+
		"its summary entry names %d newly failing and %d differing, its ClusterStatusSlice entry %d of each.\n\n",
		clusters, policies, resources, comma(clusters), policies, resources, shadow.Name, shadow.Kind, shadow.Of, newlyFailing(resources),
		policyhubv1.MaxShadowNamed, policyhubv1.MaxShadowNamed, policyhubv1.MaxClusterPreviewNamed)
	fmt.Println("| at " + comma(clusters) + " clusters | without preview | with preview | the preview, per cluster |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| agent: summary push (JSON patch of spec, every push after its first) | %s | %s | %s |\n", size(without.patchBytes), size(with.patchBytes), size(with.patchBytes-without.patchBytes))
	fmt.Printf("| agent: summary apply (its first write) | %s | %s | %s |\n", size(without.applyBytes), size(with.applyBytes), size(with.applyBytes-without.applyBytes))
	fmt.Printf("| of which spec.shadows[0] (JSON) | — | %s | %s |\n", size(with.shadowBytes), size(with.shadowBytes))
	fmt.Printf("| hub summary cache (decoded summaries) | %s | %s | %s |\n", mib(without.cacheHeap), mib(with.cacheHeap), perCluster(without.cacheHeap, with.cacheHeap))
	fmt.Printf("| hub metrics' copy of the summaries | %s | %s | %s |\n", mib(without.metricsHeap), mib(with.metricsHeap), perCluster(without.metricsHeap, with.metricsHeap))
	fmt.Printf("| metric series (`policyhub_*`) | %s | %s | %.0f |\n", comma(without.series), comma(with.series), float64(with.series-without.series)/float64(clusters))
	fmt.Printf("| ClusterStatusSlice entry of one cluster (JSON) | %s | %s | %s |\n", size(without.sliceEntryBytes), size(with.sliceEntryBytes), size(with.sliceEntryBytes-without.sliceEntryBytes))
	fmt.Printf("| hub cache of the FleetPolicy's %d ClusterStatusSlices (decoded) | %s | %s | %s |\n", (clusters+policyhubv1.MaxClustersPerSlice-1)/policyhubv1.MaxClustersPerSlice,
		mib(without.slicesHeap), mib(with.slicesHeap), perCluster(without.slicesHeap, with.slicesHeap))
	if status, ok := metric(cpu, "BenchmarkPreviewStatus1000", "status-preview-bytes"); ok {
		fmt.Printf("| the FleetPolicy's status.preview at 1,000 clusters (JSON; at most %d clusters and %d + %d resources named) | — | %s bytes | — (bounded at any fleet size) |\n",
			policyhubv1.MaxPreviewClusters, policyhubv1.MaxPreviewNamed, policyhubv1.MaxPreviewNamed, status)
	}
	for _, r := range cpu {
		fmt.Printf("| hub CPU, one status pass at 1,000 clusters: %s (`%s`) | — | %s, %s, %s allocs | %s |\n", r.what, r.name,
			r.ns.format(func(v float64) string { return time.Duration(v).Round(10 * time.Microsecond).String() }),
			r.bytes.format(func(v float64) string { return comma(int(v/1024)) + " KiB" }),
			r.allocs.format(func(v float64) string { return comma(int(v)) }),
			r.ns.format(func(v float64) string { return fmt.Sprintf("%.2f µs", v/1000/benchClusters) }))
	}
	fmt.Println("| requests the hub sends the managed clusters for a preview | — | — | 2 writes: the shadow applied when the preview starts, deleted when it ends (and 1 apply per new candidate) |")
	return nil
}

// fleetPolicy is the FleetPolicy previewed: a ClusterPolicy running on every prod cluster while
// its CEL conversion (a ValidatingPolicy, stricter: it also wants cost-center) is previewed, as
// `kubectl policyhub preview NAME -f converted.yaml` sets it. The same as the CPU benchmarks'.
func fleetPolicy() *policyhubv1.FleetPolicy {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName, UID: "5b0c5a9e-1f7e-4a4b-9d55-0c1f0e6b7a21", Generation: 3}}
	fp.Spec.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "prod"}}
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
		Spec: &kruntime.RawExtension{Raw: []byte(`{"background":true,"rules":[{"name":"require-team","match":{"any":[{"resources":{"kinds":["Deployment","StatefulSet"]}}]},` +
			`"validate":{"failureAction":"Enforce","message":"a team label is required","pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`)}}
	candidate := policyhubv1.PolicyTemplate{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy",
		Spec: &kruntime.RawExtension{Raw: []byte(`{"validationActions":["Deny"],"matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],` +
			`"operations":["CREATE","UPDATE"],"resources":["deployments","statefulsets"]}]},"validations":[{"expression":"has(object.metadata.labels) && 'team' in object.metadata.labels && 'cost-center' in object.metadata.labels",` +
			`"message":"team and cost-center labels are required"}]}`)}}
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &candidate}
	return fp
}

// shadowInfo is the shadow as the hub renders it: what the agent reads of its annotations, and
// what setPreviews looks for in a summary.
type shadowInfo struct {
	aggregate.Shadow
	Of string
}

// renderShadow renders the FleetPolicy as the hub does and returns the shadow it ships.
func renderShadow(fp *policyhubv1.FleetPolicy) (shadowInfo, error) {
	inv := placement.Inventory{Clusters: []placement.Cluster{{Name: "cluster-0000", Labels: map[string]string{"env": "prod"}}}}
	t, _, err := declare.FleetPolicyTargets(hubID, fp, inv)
	if err != nil {
		return shadowInfo{}, err
	}
	for _, obj := range t.Objects["cluster-0000"] {
		if policyhubv1.IsShadow(obj.GetLabels()) {
			a := obj.GetAnnotations()
			return shadowInfo{Shadow: aggregate.Shadow{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), ContentHash: a[policyhubv1.AnnotationContentHash]},
				Of: a[policyhubv1.AnnotationShadowOf]}, nil
		}
	}
	return shadowInfo{}, fmt.Errorf("the FleetPolicy ships no shadow")
}

// newlyFailing is how many of the cluster's resources the shadow fails and the live policy passes
// (those without a cost-center label: every third, from the first).
func newlyFailing(resources int) int { return (resources + 2) / 3 }

// fleet builds the clusters' summaries, pushes and cache, and their slice entries, and measures
// them.
func fleet(clusters, policies, resources int, shadow shadowInfo, preview bool) (*measure, error) {
	m := &measure{}
	now := time.Now().Truncate(time.Second)
	snap := snapshot(policies, resources, shadow, preview, now)
	spec := summarize.Summarize(snap, summarize.Options{Cluster: "cluster-0000"})
	if preview {
		if len(spec.Shadows) != 1 || len(spec.Shadows[0].FirstNewlyFailing) != policyhubv1.MaxShadowNamed || len(spec.Shadows[0].FirstDiffering) != policyhubv1.MaxShadowNamed {
			return nil, fmt.Errorf("the summary's shadows are %+v, want one entry naming %d of each", spec.Shadows, policyhubv1.MaxShadowNamed)
		}
		data, err := json.Marshal(spec.Shadows[0])
		if err != nil {
			return nil, err
		}
		m.shadowBytes = len(data)
		// The shadow's results are a preview's, never compliance: the rest of the summary is
		// what it is without the preview.
		base := summarize.Summarize(snapshot(policies, resources, shadow, false, now), summarize.Options{Cluster: "cluster-0000"})
		rest := spec
		rest.Shadows, rest.ContentHash = nil, ""
		base.ContentHash = ""
		if !reflect.DeepEqual(rest, base) {
			return nil, fmt.Errorf("the shadow changed the summary beyond spec.shadows")
		}
	} else if len(spec.Shadows) != 0 {
		return nil, fmt.Errorf("a summary without a shadow has shadows")
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("the summary breaks the API's rules: %w", err)
	}

	// What the agent sends: its first write applies the summary whole, every later one patches spec.
	var err error
	if m.applyBytes, m.patchBytes, err = pushed(spec, now); err != nil {
		return nil, err
	}

	// The cache: the summaries decoded from the apiserver's JSON, as an informer holds them (the
	// hub's cache keeps only their key, uid, resourceVersion and generation of the metadata).
	raw := make([][]byte, clusters)
	for i := range clusters {
		data, err := json.Marshal(stored(i, spec, now))
		if err != nil {
			return nil, err
		}
		raw[i] = data
	}
	held, err := benchkit.HoldSummaries(raw, now)
	if err != nil {
		return nil, err
	}
	cached := held.Cached
	m.cacheHeap, m.metricsHeap, m.series = held.CacheHeap, held.MetricsHeap, held.Series

	// Each cluster's entry in the FleetPolicy's ClusterStatusSlices, its preview as setPreviews
	// sets it (aggregate.ForShadows), and the slices as the hub's cache holds them.
	var shadows []aggregate.Shadow
	if preview {
		shadows = []aggregate.Shadow{shadow.Shadow}
	}
	slices, entryBytes, err := statusSlices(cached, shadows, now)
	if err != nil {
		return nil, err
	}
	m.sliceEntryBytes = entryBytes
	heap := benchkit.HeapNow()
	decoded := make([]policyhubv1.ClusterStatusSlice, len(slices))
	for i, data := range slices {
		if err := json.Unmarshal(data, &decoded[i]); err != nil {
			return nil, err
		}
	}
	m.slicesHeap = benchkit.HeapNow() - heap
	runtime.KeepAlive(slices) // the JSON, counted in both readings: freed in between, it would be subtracted
	runtime.KeepAlive(held)
	runtime.KeepAlive(decoded)
	return m, nil
}

// snapshot is one cluster as its agent's collector sees it: resources Deployments of five teams'
// namespaces judged by policies policies (the first, the live ClusterPolicy the preview is of,
// passes every one; policy p fails the first p%3, as inventorybench's summaries count), and with
// the preview its shadow, which fails every third resource (newly failing: the live policy passes
// them) and passes the others (the same verdict).
func snapshot(policies, resources int, shadow shadowInfo, preview bool, now time.Time) collect.Snapshot {
	live := collect.PolicyKey{Kind: "ClusterPolicy", Name: policyName}
	keys := []collect.PolicyKey{live}
	for p := 1; p < policies; p++ {
		keys = append(keys, collect.PolicyKey{Kind: "ValidatingPolicy", Name: fmt.Sprintf("policy-%03d", p)})
	}
	s := collect.Snapshot{
		Policies:     map[collect.PolicyKey]collect.PolicyInfo{},
		Applications: map[types.UID]string{},
		Engine:       policyhubv1.EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2"}, KyvernoWebhooks: true},
	}
	for _, k := range keys {
		s.Policies[k] = collect.PolicyInfo{Severity: "medium", Category: "Best Practices", Title: "Policy " + k.Name}
	}
	shadowKey := collect.PolicyKey{Kind: shadow.Kind, Namespace: shadow.Namespace, Name: shadow.Name}
	if preview {
		s.Policies[shadowKey] = collect.PolicyInfo{Severity: "medium", Category: "Best Practices"}
		s.Shadows = map[collect.PolicyKey]collect.ShadowInfo{shadowKey: {Of: shadow.Of, ContentHash: shadow.ContentHash}}
	}
	teams := []string{"payments", "checkout", "search", "catalog", "identity"}
	components := []string{"api-gateway", "worker-async", "frontend-web", "ledger-sync", "event-consumer", "cache-warmer", "admin-console", "batch-exporter"}
	for r := range resources {
		team := teams[r%len(teams)]
		res := collect.Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-" + team + "-prod",
			Name: fmt.Sprintf("%s-%s-%02d", team, components[r%len(components)], r), UID: types.UID(fmt.Sprintf("6f1c2d3e-0000-4000-8000-%012d", r))}
		d := &collect.Digest{Report: "wgpolicyk8s.io/v1alpha2 PolicyReport " + res.Namespace + "/" + string(res.UID), Resource: res}
		for p, k := range keys {
			c := collect.Counts{Pass: 1}
			if r < p%3 {
				c = collect.Counts{Fail: 1}
				d.Violations = append(d.Violations, collect.Violation{Policy: k, Rule: "check", Result: "fail", Severity: "medium", Category: "Best Practices",
					Message: "validation error: the resource does not meet " + k.Name + "; see the policy's documentation for the fields it requires", Time: now.Add(-time.Hour)})
			}
			d.Policies = append(d.Policies, collect.NewPolicyCounts(k, "medium", "Best Practices", c))
		}
		if preview {
			c := collect.Counts{Pass: 1}
			if r%3 == 0 {
				c = collect.Counts{Fail: 1}
			}
			d.Policies = append(d.Policies, collect.NewPolicyCounts(shadowKey, "medium", "Best Practices", c))
		}
		s.Digests = append(s.Digests, d)
	}
	return s
}

// pushed is what the agent's pusher sends to write spec (push.SummaryBodies): the first write (an
// apply of the whole summary) and every one after (a JSON patch of spec).
func pushed(spec policyhubv1.PolicyReportSummarySpec, now time.Time) (apply, patch int, err error) {
	a, p, err := push.SummaryBodies("cluster-0000", push.DefaultHeartbeat, spec, now)
	if err != nil {
		return 0, 0, err
	}
	return len(a), len(p), nil
}

// stored is the i-th cluster's summary as the hub's cache holds it: spec as its agent pushed it, the
// metadata the cache keeps, the status the hub's summary controller writes.
func stored(i int, spec policyhubv1.PolicyReportSummarySpec, now time.Time) *policyhubv1.PolicyReportSummary {
	cluster := fmt.Sprintf("cluster-%04d", i)
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{
		Namespace: cluster, Name: policyhubv1.SummaryName, UID: types.UID(fmt.Sprintf("9e3b7c1a-5d2f-4e8b-a6c4-%012d", i)),
		ResourceVersion: "123456789", Generation: 7, CreationTimestamp: metav1.NewTime(now.Add(-24 * time.Hour)),
	}}
	s.Spec = spec
	s.Spec.Cluster = cluster
	s.Spec.GeneratedAt = &metav1.Time{Time: now}
	s.Spec.HeartbeatInterval = &metav1.Duration{Duration: push.DefaultHeartbeat}
	s.Status.ObservedGeneration, s.Status.ObservedTime = 7, &metav1.MicroTime{Time: now}
	s.Status.Conditions = []metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 7, LastTransitionTime: metav1.NewTime(now), Reason: "Accepted", Message: "aggregated"}}
	return s
}

// statusSlices are the FleetPolicy's ClusterStatusSlices as JSON (up to MaxClustersPerSlice
// clusters each), every cluster Synced with its results, and its preview from its summary
// (shadows: none without a preview); and the JSON bytes of one cluster's entry.
func statusSlices(summaries []policyhubv1.PolicyReportSummary, shadows []aggregate.Shadow, now time.Time) ([][]byte, int, error) {
	var out [][]byte
	entryBytes := 0
	inForce := true
	synced := metav1.NewTime(now.Add(-time.Hour))
	owned := []aggregate.Policy{{Kind: "ClusterPolicy", Name: policyName}}
	for start := 0; start < len(summaries); start += policyhubv1.MaxClustersPerSlice {
		slice := policyhubv1.ClusterStatusSlice{ObjectMeta: metav1.ObjectMeta{
			Namespace: "policyhub-system", Name: fmt.Sprintf("fleetpolicy-%s-%d", policyName, start/policyhubv1.MaxClustersPerSlice),
			UID: "0d7e1f3a-8c2b-4b6e-9f1d-3a5c7e9b1d2f", ResourceVersion: "123456789", Generation: 12, CreationTimestamp: metav1.NewTime(now.Add(-24 * time.Hour)),
			Labels: map[string]string{policyhubv1.LabelDeclarationUID: "5b0c5a9e-1f7e-4a4b-9d55-0c1f0e6b7a21"},
		}}
		slice.Declaration = policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: policyName, UID: "5b0c5a9e-1f7e-4a4b-9d55-0c1f0e6b7a21"}
		for i := start; i < min(start+policyhubv1.MaxClustersPerSlice, len(summaries)); i++ {
			s := &summaries[i]
			res := aggregate.ForPolicies(s, owned, now)
			c := policyhubv1.ClusterStatus{Name: s.Namespace, Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce, LastSyncTime: &synced,
				Actions: policyhubv1.ActionCounts{Unchanged: 1}, Results: &res.Counts, ReportTime: res.ReportTime, ObservedGeneration: 3}
			if len(shadows) > 0 {
				p := aggregate.ForShadows(s, shadows)
				if !p.Reported {
					return nil, 0, fmt.Errorf("cluster %s: the summary does not report the shadow %s at its content", s.Namespace, shadows[0].Name)
				}
				c.Preview = &p
			}
			if i == 0 {
				data, err := json.Marshal(c)
				if err != nil {
					return nil, 0, err
				}
				entryBytes = len(data)
			}
			slice.Clusters = append(slice.Clusters, c)
		}
		data, err := json.Marshal(&slice)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, data)
	}
	return out, entryBytes, nil
}

// span is the values one measure took over go test's runs.
type span struct{ lo, hi float64 }

func (s *span) add(v float64) {
	if s.lo == 0 && s.hi == 0 || v < s.lo {
		s.lo = v
	}
	s.hi = max(s.hi, v)
}

// format is the span as f writes a value: one value, or the two ends when the runs differ.
func (s span) format(f func(float64) string) string {
	if lo, hi := f(s.lo), f(s.hi); lo != hi {
		return lo + "–" + hi
	}
	return f(s.lo)
}

// benchResult is one CPU benchmark's results in go test's output: ns/op, B/op, allocs/op and
// the metrics it reports itself (by unit).
type benchResult struct {
	what, name        string
	ns, bytes, allocs span
	metrics           map[string]span
}

// metric is the metric of unit the benchmark name reported, as go test printed it.
func metric(results []benchResult, name, unit string) (string, bool) {
	for _, r := range results {
		if m, ok := r.metrics[unit]; r.name == name && ok {
			return m.format(func(v float64) string {
				if v == float64(int(v)) {
					return comma(int(v))
				}
				return strconv.FormatFloat(v, 'f', -1, 64)
			}), true
		}
	}
	return "", false
}

// runBenchmarks runs the hub's two preview benchmarks with go test (their code is unexported) and
// reads their results; go test's own output goes to standard error.
func runBenchmarks(count int) ([]benchResult, error) {
	var out []benchResult
	for _, b := range []struct{ what, name, pkg string }{
		{"the engine's `setPreviews` (each cluster's preview from its summary)", "BenchmarkSetPreviews1000", "./hub/engine"},
		{"the FleetPolicy's `previewStatus` (status.preview from the clusters' previews)", "BenchmarkPreviewStatus1000", "./hub/controllers"},
	} {
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^"+b.name+"$", "-benchmem", "-count", strconv.Itoa(count), b.pkg)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		fmt.Fprintln(os.Stderr, "+", strings.Join(cmd.Args, " "))
		err := cmd.Run()
		os.Stderr.Write(stdout.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		r := benchResult{what: b.what, name: b.name, metrics: map[string]span{}}
		runs := 0
		sc := bufio.NewScanner(&stdout)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || !strings.HasPrefix(fields[0], b.name) {
				continue
			}
			runs++
			// The name, the iterations, then value and unit pairs.
			for i := 2; i+1 < len(fields); i += 2 {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %q %s: %w", b.name, fields[i], fields[i+1], err)
				}
				switch unit := fields[i+1]; unit {
				case "ns/op":
					r.ns.add(v)
				case "B/op":
					r.bytes.add(v)
				case "allocs/op":
					r.allocs.add(v)
				default:
					m := r.metrics[unit]
					m.add(v)
					r.metrics[unit] = m
				}
			}
		}
		if runs == 0 {
			return nil, fmt.Errorf("%s: no result in go test's output", b.name)
		}
		out = append(out, r)
	}
	return out, nil
}

// comma writes n with thousands separated, as the docs write numbers.
func comma(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + comma(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
