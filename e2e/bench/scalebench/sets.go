package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
)

// The sets scenario declares the same library of small ClusterPolicies on the virtual names
// twice, each time on a hub of its own started fresh (so that neither RSS carries the other's
// heap): as one FleetPolicy per policy, then as one PolicySet whose members a policy library
// ConfigMap holds (spec.source.inline admits at most 50). It then changes one member of the
// library: a new version of the set, which should cost each cluster one object written.

const (
	// setsFPPrefix names the FleetPolicies of the scenario's first half: sets-fp-0, …
	setsFPPrefix = "sets-fp"
	// setName is the scenario's PolicySet.
	setName = "bench-sets"
	// setLibrary is the policy library ConfigMap (in the hub's namespace) the set reads.
	setLibrary = "bench-sets-library"
	// setLibraryLabel is the value of the library's policyhub.io/policy-library label, which the
	// set's selector matches.
	setLibraryLabel = "bench-sets"
	// maxSetMembers is the most policies a PolicySet's source may hold (the hub's
	// source.DefaultLimits.MaxPolicies; a unit test keeps them equal).
	maxSetMembers = 500
)

// setMemberName names the set's i-th member: apart from the FleetPolicies' policies (named as
// their FleetPolicies), so that the set's objects are never the ones being pruned.
func setMemberName(i int) string { return fmt.Sprintf("sets-member-%03d", i) }

// setMemberKey is the library's key holding member i: one member a key, so that a new version
// changes one key.
func setMemberKey(i int) string { return setMemberName(i) + ".yaml" }

// setMemberYAML is member i as the library holds it: benchkit's i-th ClusterPolicy, named; a
// version above 0 changes its rule's message (its spec: a change the clusters must get).
func setMemberYAML(i, version int) (string, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(benchkit.Template(i)), &u.Object); err != nil {
		return "", fmt.Errorf("member %d: %w", i, err)
	}
	u.SetName(setMemberName(i))
	if version > 0 {
		rules, _, err := unstructured.NestedSlice(u.Object, "spec", "rules")
		if err != nil || len(rules) == 0 {
			return "", fmt.Errorf("member %d: benchkit's template has no spec.rules to change (%v)", i, err)
		}
		rule, ok := rules[0].(map[string]any)
		if !ok {
			return "", fmt.Errorf("member %d: spec.rules[0] is a %T, not an object", i, rules[0])
		}
		msg := fmt.Sprintf("configmaps need an owner label (version %d)", version+1)
		if err := unstructured.SetNestedField(rule, msg, "validate", "message"); err != nil {
			return "", fmt.Errorf("member %d: %w", i, err)
		}
		if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
			return "", fmt.Errorf("member %d: %w", i, err)
		}
	}
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("member %d: %w", i, err)
	}
	return string(data), nil
}

// newSetLibrary is the policy library ConfigMap of n members, in namespace (the hub's).
func newSetLibrary(namespace string, n int) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: setLibrary, Labels: map[string]string{policyhubv1.LabelPolicyLibrary: setLibraryLabel}},
		Data:       map[string]string{},
	}
	for i := range n {
		data, err := setMemberYAML(i, 0)
		if err != nil {
			return nil, err
		}
		cm.Data[setMemberKey(i)] = data
	}
	return cm, nil
}

// newPolicySet is the scenario's PolicySet: every member of the library, on every cluster
// labelled as the virtual names are (the FleetPolicies' placement).
func newPolicySet() *policyhubv1.PolicySet {
	ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: setName}}
	ps.Spec.Source.ConfigMaps = &policyhubv1.ConfigMapSource{Selector: &metav1.LabelSelector{
		MatchLabels: map[string]string{policyhubv1.LabelPolicyLibrary: setLibraryLabel},
	}}
	ps.Spec.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{setLabel: "virtual"}}
	return ps
}

// sizeTotal is a count of objects and their JSON bytes.
type sizeTotal struct {
	objects int
	bytes   float64
}

func (s *sizeTotal) add(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.objects++
	s.bytes += float64(len(data))
	return nil
}

// setsResult is what the sets scenario measured.
type setsResult struct {
	members int
	// fp is the FleetPolicies' half, set the PolicySet's: hub, convergence, RSS, CPU, writes.
	fp, set *result
	// The declarations' .status and their ClusterStatusSlices, once converged and settled.
	fpStatus, fpSlices, setStatus, setSlices sizeTotal
	// prune is the FleetPolicies deleted, the hub running: until every one is gone (its
	// finalizer lifted once its policies are pruned from every cluster).
	prune struct {
		ran, ok bool
		took    time.Duration
		left    int
	}
	// setWait is how the set's first version converged.
	setWait setWait
	// change is the set's new version, one member changed in the library.
	change struct {
		ran           bool
		member        string
		wait          setWait
		took          time.Duration
		ops           opsDelta
		opsOK         bool
		managedWrites map[string]float64 // mutating requests the managed apiservers served, by resource
		cpu           map[string]float64
		hubWrites     map[string]float64
	}
}

// runSets is the sets scenario (see the package comment).
func (b *bench) runSets(ctx context.Context) error {
	// Again, whatever ran before: the dark scenario leaves some names pointing at black holes,
	// and these Secrets point every name at its real apiserver again.
	if err := b.addVirtualClusters(ctx); err != nil {
		return fmt.Errorf("sets: %w", err)
	}
	names := b.virtualNames()
	s := &setsResult{members: b.o.setMembers}
	b.sets = s

	s.fp = &result{name: "sets-fp", hubID: "bench-sets-fp", prefix: setsFPPrefix, clusters: len(names), clusterNames: names}
	for i := range s.members {
		s.fp.fps = append(s.fp.fps, fmt.Sprintf("%s-%d", setsFPPrefix, i))
	}
	h, _, err := b.converge(ctx, s.fp, "virtual", b.waitSynced(s.fp))
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("sets: FleetPolicies: %w", err)
	}
	if s.fpStatus, s.fpSlices, err = b.fleetPolicyBytes(ctx, s.fp.fps); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("sets: FleetPolicies: %w", err)
	}
	logf("sets: %d FleetPolicies: statuses %s, %d slices %s", len(s.fp.fps), kib(s.fpStatus.bytes), s.fpSlices.objects, kib(s.fpSlices.bytes))
	if err := b.pruneFleetPolicies(ctx, s, h); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("sets: delete the FleetPolicies: %w", err)
	}
	if err := b.finish(ctx, s.fp, h); err != nil {
		return fmt.Errorf("sets: FleetPolicies: %w", err)
	}

	s.set = &result{name: "sets-set", hubID: "bench-sets-set", prefix: setName, clusters: len(names), clusterNames: names}
	h, t, stopTracking, err := b.convergeSet(ctx, s)
	if stopTracking != nil {
		defer stopTracking()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("sets: PolicySet: %w", err), b.finishSet(ctx, s.set, h))
	}
	if err := b.changeMember(ctx, s, h, t); err != nil {
		return errors.Join(fmt.Errorf("sets: new version: %w", err), b.finishSet(ctx, s.set, h))
	}
	return b.finishSet(ctx, s.set, h)
}

// fleetPolicyBytes sizes the named FleetPolicies' statuses and ClusterStatusSlices, as the
// benchmark's informer holds them.
func (b *bench) fleetPolicyBytes(ctx context.Context, names []string) (status, sliceTotal sizeTotal, err error) {
	for _, name := range names {
		fp := &policyhubv1.FleetPolicy{}
		if err := b.informer.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
			return status, sliceTotal, fmt.Errorf("read FleetPolicy %s: %w", name, err)
		}
		if err := status.add(fp.Status); err != nil {
			return status, sliceTotal, fmt.Errorf("FleetPolicy %s: %w", name, err)
		}
	}
	sliceTotal, err = b.sliceBytes(ctx, policyhubv1.KindFleetPolicy, names)
	return status, sliceTotal, err
}

// sliceBytes sizes the ClusterStatusSlices of the named declarations of kind: the JSON of each
// without managedFields (which neither the hub's cache nor a reader keeps).
func (b *bench) sliceBytes(ctx context.Context, kind string, names []string) (sizeTotal, error) {
	var out sizeTotal
	list := &policyhubv1.ClusterStatusSliceList{}
	if err := b.informer.List(ctx, list); err != nil {
		return out, fmt.Errorf("list ClusterStatusSlices: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Declaration.Kind != kind || !slices.Contains(names, s.Declaration.Name) {
			continue
		}
		c := s.DeepCopy()
		c.ManagedFields = nil
		if err := out.add(c); err != nil {
			return out, fmt.Errorf("ClusterStatusSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return out, nil
}

// pruneFleetPolicies deletes the scenario's FleetPolicies with their hub running and waits
// until every one is gone: the hub lifts a FleetPolicy's finalizer once its policy is pruned
// from every cluster, so the PolicySet that follows starts on clusters holding none of them.
func (b *bench) pruneFleetPolicies(ctx context.Context, s *setsResult, h *hubProc) error {
	r := s.fp
	logf("sets: deleting the %d FleetPolicies (the hub prunes their policies from %d clusters)...", len(r.fps), r.clusters)
	start := time.Now()
	err := inParallel(8, len(r.fps), func(i int) error {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.fps[i]}}
		if err := b.hub.Delete(ctx, fp); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete FleetPolicy %s: %w", r.fps[i], err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.prune.ran = true
	deadline := start.Add(b.o.timeout)
	for {
		left := 0
		for _, name := range r.fps {
			err := b.informer.Get(ctx, client.ObjectKey{Name: name}, &policyhubv1.FleetPolicy{})
			switch {
			case err == nil:
				left++
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("read FleetPolicy %s: %w", name, err)
			}
		}
		if left == 0 {
			s.prune.ok, s.prune.took = true, time.Since(start)
			logf("sets: every FleetPolicy gone after %s", s.prune.took.Round(10*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			s.prune.left = left
			logf("sets: %d FleetPolicies still there %s after they were deleted (their finalizers are lifted without the hub)", left, b.o.timeout)
			return nil
		}
		if err := h.exitError(); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// convergeSet runs the PolicySet's hub from start to a settled state, as converge does the
// FleetPolicies': starts it, writes the library (before the clock: with no set, the hub does
// nothing with it), creates the set (the clock starts), waits until the set is Ready with every
// cluster synced at its source digest, and measures the hub settled. The hub is returned running,
// with the tracker and the function that stops it.
func (b *bench) convergeSet(ctx context.Context, s *setsResult) (*hubProc, *setTracker, func(), error) {
	r := s.set
	baseline, err := b.openWatches(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := b.startHub(ctx, r.hubID, b.f.SecretNamespace)
	if err != nil {
		return nil, nil, nil, err
	}
	r.logPath = h.logPath
	b.settle(h, 30*time.Second)
	t, stopTracking, err := newSetTracker(ctx, b.informer, setName, r.clusters)
	if err != nil {
		return h, nil, nil, err
	}
	// The hub's namespace is the one it is given as --leader-election-namespace (startHub).
	lib, err := newSetLibrary(b.f.SecretNamespace, s.members)
	if err != nil {
		return h, t, stopTracking, err
	}
	if err := b.hub.Create(ctx, lib); err != nil {
		return h, t, stopTracking, fmt.Errorf("create the policy library ConfigMap %s/%s: %w", lib.Namespace, lib.Name, err)
	}
	logf("sets: creating PolicySet %s (%d members from ConfigMap %s/%s) for %d clusters...", setName, s.members, lib.Namespace, lib.Name, r.clusters)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	r.start = time.Now()
	waitProfile := b.profileCPU(ctx, h, 30*time.Second, r.name+"-converge-cpu.pb.gz")
	defer waitProfile()
	if err := b.hub.Create(ctx, newPolicySet()); err != nil {
		return h, t, stopTracking, fmt.Errorf("create PolicySet %s: %w", setName, err)
	}
	s.setWait = t.wait(ctx, r.clusterNames, "", r.start.Add(b.o.timeout))
	r.converged, r.missing = s.setWait.ok, s.setWait.missing
	if s.setWait.ok {
		r.converge = s.setWait.at.Sub(r.start)
	}
	r.cpu = cpuBetween(before, b.snapshot(h))
	r.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	r.phases = t.phases()
	logf("sets: PolicySet converged: %s (%s); statuses: %s", fmtDur(r.converge, r.converged, b.o.timeout), s.setWait, r.phases)
	if err := h.exitError(); err != nil {
		return h, t, stopTracking, err
	}
	if r.state, err = b.measureState(ctx, h, baseline, 2*time.Minute); err != nil {
		return h, t, stopTracking, err
	}
	logf("sets: PolicySet: RSS %s, goroutines %.0f, watches %.0f, settled %v", mib(r.state.rss), r.state.goroutines, r.state.watches, r.state.settled)
	b.saveProfile(ctx, h, "heap", "gc=1", r.name+"-heap.pb.gz")
	b.saveProfile(ctx, h, "goroutine", "debug=1", r.name+"-goroutine.txt")
	ps := &policyhubv1.PolicySet{}
	if err := b.informer.Get(ctx, client.ObjectKey{Name: setName}, ps); err != nil {
		return h, t, stopTracking, fmt.Errorf("read PolicySet %s: %w", setName, err)
	}
	s.setStatus = sizeTotal{}
	if err := s.setStatus.add(ps.Status); err != nil {
		return h, t, stopTracking, fmt.Errorf("PolicySet %s: %w", setName, err)
	}
	if s.setSlices, err = b.sliceBytes(ctx, policyhubv1.KindPolicySet, []string{setName}); err != nil {
		return h, t, stopTracking, err
	}
	logf("sets: PolicySet: status %s, %d slices %s", kib(s.setStatus.bytes), s.setSlices.objects, kib(s.setSlices.bytes))
	return h, t, stopTracking, nil
}

// changeMember writes a new version of one member into the library and measures the set's new
// version: until every cluster is synced at the new digest and the set is Ready, and what the
// hub wrote to the clusters for it (its policyhub_sync_operations_total, and the managed
// apiservers' own count of mutating requests), the hub settled afterwards so that late writes count.
func (b *bench) changeMember(ctx context.Context, s *setsResult, h *hubProc, t *setTracker) error {
	c := &s.change
	i := s.members / 2
	c.member = setMemberName(i)
	from := t.digest()
	if !s.set.converged || from == "" {
		// A new version's time and writes mean nothing while the first one is not everywhere.
		logf("sets: new version not measured: the first version did not converge (%s)", s.setWait)
		return nil
	}
	data, err := setMemberYAML(i, 1)
	if err != nil {
		return err
	}
	lib := &corev1.ConfigMap{}
	if err := b.hub.Get(ctx, client.ObjectKey{Namespace: b.f.SecretNamespace, Name: setLibrary}, lib); err != nil {
		return fmt.Errorf("read the policy library ConfigMap: %w", err)
	}
	lib.Data[setMemberKey(i)] = data
	opsBefore, opsOK, err := syncOps(ctx, h)
	if err != nil {
		return fmt.Errorf("hub /metrics: %w", err)
	}
	managedBefore, err := b.managedWrites(ctx)
	if err != nil {
		return err
	}
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	logf("sets: changing member %s of %d in the library (version %s)...", c.member, s.members, from)
	start := time.Now()
	if err := b.hub.Update(ctx, lib); err != nil {
		return fmt.Errorf("update the policy library ConfigMap: %w", err)
	}
	c.ran = true
	deadline := start.Add(b.o.timeout)
	c.wait = t.wait(ctx, s.set.clusterNames, from, deadline)
	if c.wait.ok {
		c.took = c.wait.at.Sub(start)
	}
	logf("sets: new version: %s (%s); settling...", fmtDur(c.took, c.wait.ok, b.o.timeout), c.wait)
	b.settle(h, time.Until(deadline))
	c.cpu = cpuBetween(before, b.snapshot(h))
	c.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	managedAfter, err := b.managedWrites(ctx)
	if err != nil {
		return err
	}
	c.managedWrites = writesBetween(managedBefore, managedAfter)
	opsAfter, opsAfterOK, err := syncOps(ctx, h)
	if err != nil {
		return fmt.Errorf("hub /metrics: %w", err)
	}
	// The counter has a series only once something was counted: it was, at the first version.
	c.opsOK = opsOK && opsAfterOK
	c.ops = opsBetween(opsBefore, opsAfter)
	logf("sets: new version: %.0f objects written to the clusters (%s), %.2f per cluster, at most %.0f in one; managed apiservers: %s",
		c.ops.writes(), c.ops, c.ops.writes()/float64(s.set.clusters), c.ops.maxWrites, writesLine(c.managedWrites))
	return nil
}

// finishSet stops the PolicySet's hub and removes the set (its finalizer first, as finish does
// the FleetPolicies'), its library and its snapshots: no garbage collector runs on the fleet's hub.
func (b *bench) finishSet(ctx context.Context, r *result, h *hubProc) error {
	var errs []error
	var err error
	r.stopTook, r.stopKilled, err = h.stop()
	errs = append(errs, err)
	if r.stopKilled {
		logf("%s: the hub did not end within %s of SIGTERM: killed", r.name, stopGrace)
	}
	r.logLines, r.logErrors = logStats(r.logPath)
	ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: setName}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := b.hub.Patch(ctx, ps, patch); client.IgnoreNotFound(err) != nil {
		errs = append(errs, fmt.Errorf("lift the finalizer of PolicySet %s: %w", setName, err))
	}
	if err := b.hub.Delete(ctx, ps); client.IgnoreNotFound(err) != nil {
		errs = append(errs, fmt.Errorf("delete PolicySet %s: %w", setName, err))
	}
	lib := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.f.SecretNamespace, Name: setLibrary}}
	if err := b.hub.Delete(ctx, lib); client.IgnoreNotFound(err) != nil {
		errs = append(errs, fmt.Errorf("delete the policy library ConfigMap: %w", err))
	}
	err = b.hub.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(b.f.SecretNamespace), client.MatchingLabels{policyhubv1.LabelPolicySet: setName})
	if err != nil {
		errs = append(errs, fmt.Errorf("delete the snapshots of PolicySet %s: %w", setName, err))
	}
	return errors.Join(errs...)
}

// managedWrites counts the mutating requests every managed kube-apiserver has served, by resource.
func (b *bench) managedWrites(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range b.f.Managed {
		m, err := scrapeAPIServer(ctx, c.Config, "apiserver_request_total")
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %w", c.Name, err)
		}
		addWrites(out, m)
	}
	return out, nil
}

// syncOps reads the hub's policyhub_sync_operations_total by cluster and action; found says
// whether the hub exports the counter at all (a series exists once an action was counted).
func syncOps(ctx context.Context, h *hubProc) (ops map[string]map[string]float64, found bool, err error) {
	const name = "policyhub_sync_operations_total"
	m, err := h.scrape(ctx, name)
	if err != nil {
		return nil, false, err
	}
	ops = map[string]map[string]float64{}
	for _, s := range m {
		if s.name != name {
			continue
		}
		found = true
		cluster := s.labels["cluster"]
		if ops[cluster] == nil {
			ops[cluster] = map[string]float64{}
		}
		ops[cluster][s.labels["action"]] += s.value
	}
	return ops, found, nil
}

// opsDelta is what the hub's syncs did between two readings of policyhub_sync_operations_total.
type opsDelta struct {
	byAction map[string]float64
	// clusters counts the clusters with any action counted (synced at least once).
	clusters int
	// maxWrites is the most objects written (created, updated, deleted) in one cluster, maxCluster it.
	maxWrites  float64
	maxCluster string
	// oneUpdate counts the clusters whose only write was one object updated.
	oneUpdate int
}

// written sums the actions that write an object to a cluster.
func written(byAction map[string]float64) float64 {
	return byAction["created"] + byAction["updated"] + byAction["deleted"]
}

func opsBetween(before, after map[string]map[string]float64) opsDelta {
	d := opsDelta{byAction: map[string]float64{}}
	clusters := make([]string, 0, len(after))
	for c := range after {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters) // the cluster named for the most writes is the first of them
	for _, c := range clusters {
		counted := false
		delta := map[string]float64{}
		for action, v := range after[c] {
			if n := v - before[c][action]; n > 0 {
				delta[action] = n
				d.byAction[action] += n
				counted = true
			}
		}
		wrote := written(delta)
		if counted {
			d.clusters++
		}
		if wrote > d.maxWrites {
			d.maxWrites, d.maxCluster = wrote, c
		}
		if wrote == 1 && delta["updated"] == 1 {
			d.oneUpdate++
		}
	}
	return d
}

func (d opsDelta) writes() float64 { return written(d.byAction) }

func (d opsDelta) String() string {
	var out []string
	for _, a := range []string{"created", "updated", "deleted", "unchanged", "conflict", "failed"} {
		out = append(out, fmt.Sprintf("%s %.0f", a, d.byAction[a]))
	}
	return strings.Join(out, ", ")
}

// shortDigest is a digest cut for a table: its algorithm and 12 hex digits.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
