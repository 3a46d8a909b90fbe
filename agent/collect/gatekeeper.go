package collect

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/policyhub/policyhub/agent/engine"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Gatekeeper's results: its audit writes them into each Constraint's status, totalViolations
// (every violation the audit found) and violations (the first --constraint-violations-limit of
// them, 20 by default: resource and message). Gatekeeper keeps no report per resource and counts
// no passes, so a Constraint's digest says fail = totalViolations, pass nothing (0: unknown, never
// invented), and lists the violations Gatekeeper listed. Denials at admission are not counted
// per Constraint: Gatekeeper's metrics (gatekeeper_validation_request_count) carry the admission
// status but no constraint label, so Blocked stays 0 for Gatekeeper's policies.

// Bounds on what a cluster's Gatekeeper may make the agent keep: a cluster is not trusted to be
// reasonable.
const (
	// MaxGatekeeperKinds is how many Constraint kinds (templates) are watched; the rest, by
	// name, are left out.
	MaxGatekeeperKinds = 500
	// MaxGatekeeperViolations is how many of one Constraint's listed violations are kept
	// (Gatekeeper lists 20 by default; --constraint-violations-limit may raise it).
	MaxGatekeeperViolations = 100
)

// Gatekeeper's APIs and objects, as its release makes them.
var (
	gatekeeperConstraints = schema.GroupVersion{Group: policyhubv1.GatekeeperConstraintGroup, Version: "v1beta1"}
	gatekeeperTemplates   = schema.GroupVersionResource{Group: policyhubv1.GatekeeperTemplateGroup, Version: "v1", Resource: "constrainttemplates"}
)

const (
	// gatekeeperDeployment is the Deployment of Gatekeeper's webhook (its release's and Helm
	// chart's name), whose image tag is its version; gatekeeperContainer its container.
	gatekeeperDeployment = "gatekeeper-controller-manager"
	gatekeeperContainer  = "manager"
	// gatekeeperSystemLabel marks the objects of Gatekeeper's release, its webhook
	// configurations among them.
	gatekeeperSystemLabel = "gatekeeper.sh/system=yes"
	// DefaultGatekeeperNamespace is Options.GatekeeperNamespace's default.
	DefaultGatekeeperNamespace = "gatekeeper-system"
)

// gatekeeperWatch is what the collector watches of Gatekeeper: one informer per Constraint kind
// served, and Gatekeeper's facts. Guarded by Collector.mu.
type gatekeeperWatch struct {
	// client reads Constraints (their kinds are known only at run time); nil: Gatekeeper is not
	// read (a collector on fake clients).
	client      dynamic.Interface
	constraints map[string]*constraintInformer // by kind
	served      bool
	facts       policyhubv1.GatekeeperFacts
}

type constraintInformer struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// discoverGatekeeper follows the Constraint kinds the cluster serves (an informer each, at most
// MaxGatekeeperKinds) and Gatekeeper's facts; it says whether anything changed. c.mu is not held.
func (c *Collector) discoverGatekeeper(ctx context.Context) (changed bool, err error) {
	if c.gatekeeper.client == nil {
		return false, nil
	}
	templates, err := served(c.discovery, gatekeeperTemplates)
	if err != nil {
		return false, fmt.Errorf("discover Gatekeeper's templates: %w", err)
	}
	kinds := map[string]string{} // kind → resource
	list, err := c.discovery.ServerResourcesForGroupVersion(gatekeeperConstraints.String())
	switch {
	case err == nil:
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") && r.Kind != "" && len(r.Kind) <= policyhubv1.MaxSummaryKindLength {
				kinds[r.Kind] = r.Name
			}
		}
	case !notServed(err):
		return false, fmt.Errorf("discover Gatekeeper's Constraint kinds: %w", err)
	}
	names := slices.Sorted(maps.Keys(kinds))
	if len(names) > MaxGatekeeperKinds {
		names = names[:MaxGatekeeperKinds]
	}
	facts := policyhubv1.GatekeeperFacts{}
	if templates || len(names) > 0 {
		facts, err = c.gatekeeperFacts(ctx)
		if err != nil {
			return false, err
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	g := &c.gatekeeper
	if g.constraints == nil {
		g.constraints = map[string]*constraintInformer{}
	}
	for kind, w := range g.constraints {
		if !slices.Contains(names, kind) {
			w.stop()
			delete(g.constraints, kind)
			changed = true
		}
	}
	for _, kind := range names {
		if _, started := g.constraints[kind]; !started {
			g.constraints[kind] = c.watchConstraints(ctx, kind, gatekeeperConstraints.WithResource(kinds[kind]))
			changed = true
		}
	}
	running := templates || len(names) > 0
	if running != g.served || facts != g.facts {
		g.served, g.facts = running, facts
		changed = true
	}
	return changed, nil
}

// gatekeeperFacts reads whether Gatekeeper's webhook is registered and, from its Deployment's
// image, its version. What the agent may not read is not known: false, empty.
func (c *Collector) gatekeeperFacts(ctx context.Context) (policyhubv1.GatekeeperFacts, error) {
	var f policyhubv1.GatekeeperFacts
	hooks, err := c.metadata.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}).
		List(ctx, metav1.ListOptions{LabelSelector: gatekeeperSystemLabel, Limit: 1})
	switch {
	case err == nil:
		f.Webhook = len(hooks.Items) > 0
	case !apierrors.IsForbidden(err):
		return f, fmt.Errorf("list Gatekeeper's webhook configurations: %w", err)
	}
	ns := c.opts.GatekeeperNamespace
	if ns == "" {
		ns = DefaultGatekeeperNamespace
	}
	d, err := c.clientset.AppsV1().Deployments(ns).Get(ctx, gatekeeperDeployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return f, nil
	case err != nil:
		return f, fmt.Errorf("get Gatekeeper's Deployment: %w", err)
	}
	containers := d.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == gatekeeperContainer })
	if i < 0 && len(containers) == 1 {
		i = 0
	}
	source := "Deployment " + ns + "/" + gatekeeperDeployment
	if i < 0 {
		f.VersionSource = Cut(source+": no container "+gatekeeperContainer, policyhubv1.MaxKyvernoVersionSourceLength)
		return f, nil
	}
	version, why := engine.ImageVersion(containers[i].Image)
	f.Version, f.VersionSource = version, source
	if why != "" {
		f.VersionSource = source + ": " + why
	}
	f.VersionSource = Cut(f.VersionSource, policyhubv1.MaxKyvernoVersionSourceLength)
	return f, nil
}

// watchConstraints starts an informer on one Constraint kind that keeps only its digests.
func (c *Collector) watchConstraints(ctx context.Context, kind string, gvr schema.GroupVersionResource) *constraintInformer {
	ctx, stop := context.WithCancel(ctx)
	client := c.gatekeeper.client.Resource(gvr)
	inf := c.newInformer(ctx, client, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		key := PolicyKey{Engine: policyhubv1.EngineGatekeeper, Kind: kind, Name: u.GetName()}
		m := metav1.ObjectMeta{Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
		return &item{ObjectMeta: m, policy: &key, digests: ConstraintDigests(kind, u)}, nil
	})
	return &constraintInformer{informer: inf, stop: stop}
}

// gatekeeperSynced says whether every Constraint informer has listed once. c.mu is held.
func (c *Collector) gatekeeperSynced() bool {
	for _, w := range c.gatekeeper.constraints {
		if !w.informer.HasSynced() {
			return false
		}
	}
	return true
}

// gatekeeperSnapshot adds the Constraints' digests, the Constraints as known policies, and
// Gatekeeper's facts to s. c.mu is held.
func (c *Collector) gatekeeperSnapshot(s *Snapshot) {
	g := &c.gatekeeper
	for _, w := range g.constraints {
		for _, obj := range w.informer.GetStore().List() {
			if it, ok := obj.(*item); ok && it.policy != nil {
				s.Policies[*it.policy] = PolicyInfo{}
				s.Digests = append(s.Digests, it.digests...)
			}
		}
	}
	if !g.served {
		return
	}
	facts := g.facts
	s.Engine.Gatekeeper = &facts
	s.Engine.AddEngine(policyhubv1.EngineGatekeeper)
}

// ConstraintDigests reduces a Constraint of kind to digests: one per resource among the
// violations Gatekeeper listed (fail = its violations there, each listed with its message), and
// one about no resource for the violations Gatekeeper counted but did not list (or, when it
// found none, to say the Constraint was audited: every count 0). A Constraint the audit has not
// looked at yet (no status.totalViolations) has no digest. Every value is bounded.
func ConstraintDigests(kind string, u *unstructured.Unstructured) []*Digest {
	total, found, err := unstructured.NestedInt64(u.Object, "status", "totalViolations")
	if err != nil || !found {
		return nil
	}
	total = min(max(total, 0), math.MaxInt32)
	key := PolicyKey{Engine: policyhubv1.EngineGatekeeper, Kind: kind, Name: u.GetName()}
	report := gatekeeperConstraints.String() + " " + kind + " /" + u.GetName()
	var audited time.Time
	if ts, _, _ := unstructured.NestedString(u.Object, "status", "auditTimestamp"); ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			audited = t.UTC()
		}
	}
	listed, _, _ := unstructured.NestedSlice(u.Object, "status", "violations")
	if len(listed) > MaxGatekeeperViolations {
		listed = listed[:MaxGatekeeperViolations]
	}
	byResource := map[Resource]*Digest{}
	var out []*Digest
	kept := int64(0)
	for _, v := range listed {
		if kept >= total {
			break // never more listed than counted
		}
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return Cut(s, policyhubv1.MaxSummaryNameLength) }
		apiVersion := str("version")
		if g := str("group"); g != "" {
			apiVersion = g + "/" + apiVersion
		}
		r := Resource{APIVersion: apiVersion, Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}
		d := byResource[r]
		if d == nil {
			d = &Digest{Report: report, Resource: r, Policies: []PolicyCounts{NewPolicyCounts(key, "", "", Counts{})}}
			d.Policies[0].Saw(audited)
			byResource[r] = d
			out = append(out, d)
		}
		d.Policies[0].Counts.Fail++
		message, _ := m["message"].(string)
		d.Violations = append(d.Violations, Violation{Policy: key, Result: "fail", Message: Cut(message, MaxMessage), Time: audited})
		kept++
	}
	if rest := total - kept; rest > 0 || total == 0 {
		d := &Digest{Report: report, Policies: []PolicyCounts{NewPolicyCounts(key, "", "", Counts{Fail: int32(rest)})}}
		d.Policies[0].Saw(audited)
		out = append(out, d)
	}
	return out
}
