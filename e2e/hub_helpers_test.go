package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/hub/statusslice"
	"github.com/policyhub/policyhub/hub/work"
)

// testHub is a hub controller running in the test process against the fleet's hub.
type testHub struct {
	registry *prometheus.Registry
	// metricsURL serves the registry over HTTP, as the hub's /metrics.
	metricsURL string
	// workers are the hub's per-cluster workers.
	workers *work.Workers
}

// startHub runs the hub's controllers — FleetPolicy, cluster departures, ApplicationPolicy,
// PolicyReportSummary and the KubeVela adapter — (hub id e2e-hub) until the test ends. Register it
// before creating FleetPolicies, so their deletion (which needs the running hub to prune and
// release the finalizer) is cleaned up first.
// ensureHubNamespace creates the hub's namespace, kept for the package's whole run (a deleted
// namespace stays Terminating a while), as a hub's own namespace is.
func ensureHubNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e2eHubNamespace}}
	if err := directClient(t, fleetOf(t).Hub.Config).Create(testContext(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", e2eHubNamespace, err)
	}
}

// startHub runs the hub's controllers in this process until the test ends; options, when
// given, change its HubOptions.
func startHub(t *testing.T, resync time.Duration, options ...func(*controllers.HubOptions)) *testHub {
	t.Helper()
	ensureHubNamespace(t)
	cacheOptions := controllers.CacheOptions(fleetOf(t).SecretNamespace, e2eHubNamespace, "")
	if selector := scopeSelector(t); selector != nil {
		cacheOptions = controllers.ScopeCache(cacheOptions, selector)
	}
	mgr, err := ctrl.NewManager(fleetOf(t).Hub.Config, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cacheOptions,
		Client:                 controllers.ClientOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &testHub{registry: prometheus.NewRegistry()}
	opts := controllers.HubOptions{
		Gateway: fleetOf(t).Hub.Config, SecretNamespace: fleetOf(t).SecretNamespace, HubID: e2eHubID,
		Lock: lockOptions(e2eHubID + "/" + t.Name()), Registry: h.registry, Resync: resync,
		RetryMaxDelay:  2 * time.Second, // outages in tests last seconds
		ProbeTimeout:   2 * time.Second,
		StatusCoalesce: time.Second, ApplicationStatusInterval: time.Second, DepartureRecheck: 2 * time.Second,
		Namespace: e2eHubNamespace,
		// Ten clusters a slice: a declaration's state spans several slices with the fleet's few
		// clusters (and the tests' extra ones), as it does at fleet scale.
		ClustersPerSlice: 10,
	}
	if fleetOf(t).FluxStorage != "" {
		// The fleet's source-controller serves its artifacts on 127.0.0.1, as it would on its
		// Service in a cluster: that one server, and the Flux sources of flux-system.
		fence, err := source.NewFluxFence([]string{e2eHubNamespace, fleet.FluxNamespace}, fleetOf(t).FluxStorage)
		if err != nil {
			t.Fatal(err)
		}
		opts.Flux = &fence
	}
	if scope, parallel := testScope(t); parallel {
		// Side by side, each test's hub takes a sync Lease of its own: their objects never
		// meet, and 16 hubs queueing for one Lease per cluster would test the queue instead.
		opts.Lock.LeaseName = "policyhub-sync-" + scope
	}
	for _, o := range options {
		o(&opts)
	}
	workers, err := controllers.SetupHub(testContext(t), mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(workers.Close)
	h.workers = workers
	// The hub's /metrics, as Prometheus scrapes it.
	metricsServer := httptest.NewServer(promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{}))
	t.Cleanup(metricsServer.Close)
	h.metricsURL = metricsServer.URL
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub manager: %v", err)
		}
	})
	return h
}

// e2eHubNamespace is the e2e hub's namespace on the hub, where it publishes its id.
const e2eHubNamespace = "policyhub-system"

// createFleetPolicy creates a FleetPolicy from YAML and, when the test ends, deletes it and waits
// until the hub has pruned it and let it go.
func createFleetPolicy(t *testing.T, manifest string) *policyhubv1.FleetPolicy {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	fp := &policyhubv1.FleetPolicy{}
	if err := yaml.Unmarshal([]byte(manifest), fp); err != nil {
		t.Fatal(err)
	}
	inScope(t, fp)
	if err := hub.Create(ctx, fp); err != nil {
		t.Fatalf("create FleetPolicy %s: %v", fp.Name, err)
	}
	t.Cleanup(func() { deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: fp.Name}}) })
	return fp
}

// deleteDeclaration deletes a declaration (obj names it; its kind is obj's type) and waits until
// the hub has pruned it and let it go: a running hub must release its finalizer.
func deleteDeclaration(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	hub := directClient(t, fleetOf(t).Hub.Config)
	what := fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj))
	if err := hub.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %s: %v", what, err)
		return
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, what+" pruned and gone", func() error {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// updateFleetPolicy reads the FleetPolicy, applies change and writes it back.
func updateFleetPolicy(t *testing.T, name string, change func(*policyhubv1.FleetPolicy)) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	// The hub writes the status meanwhile (a new resourceVersion): read again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &policyhubv1.FleetPolicy{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		change(live)
		return hub.Update(context.Background(), live)
	})
	if err != nil {
		t.Fatalf("update FleetPolicy %s: %v", name, err)
	}
}

// fleetView is a FleetPolicy with its state in each cluster, read from its ClusterStatusSlices.
type fleetView struct {
	*policyhubv1.FleetPolicy
	Clusters []policyhubv1.ClusterStatus
}

// appView is an ApplicationPolicy with its state in each cluster, read from its ClusterStatusSlices.
type appView struct {
	*policyhubv1.ApplicationPolicy
	Clusters []policyhubv1.ClusterStatus
}

// notAnObject shadows the API object's DeepCopyObject in the views, so that a view is no
// client.Object: passing one to a client (which fails at run time, its type unknown to the
// scheme) does not compile. Pass its FleetPolicy or ApplicationPolicy.
type notAnObject struct{}

func (fleetView) DeepCopyObject() notAnObject { return notAnObject{} }
func (appView) DeepCopyObject() notAnObject   { return notAnObject{} }

// clusterStates reads a declaration's state in each cluster from its ClusterStatusSlices in
// namespace, as the hub does.
func clusterStates(ctx context.Context, hub client.Reader, namespace, kind string, decl client.Object) ([]policyhubv1.ClusterStatus, error) {
	owner := statusslice.Owner{Kind: kind, Name: decl.GetName(), UID: string(decl.GetUID()), Namespace: namespace}
	clusters, _, err := statusslice.Read(ctx, hub, owner)
	return clusters, err
}

// fleetPolicyWithClusters reads a FleetPolicy and its state in each cluster.
func fleetPolicyWithClusters(ctx context.Context, hub client.Reader, name string) (*fleetView, error) {
	fp := &policyhubv1.FleetPolicy{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
		return nil, err
	}
	clusters, err := clusterStates(ctx, hub, e2eHubNamespace, policyhubv1.KindFleetPolicy, fp)
	if err != nil {
		return nil, err
	}
	return &fleetView{FleetPolicy: fp, Clusters: clusters}, nil
}

// applicationPolicyWithClusters reads an ApplicationPolicy and its state in each cluster.
func applicationPolicyWithClusters(ctx context.Context, hub client.Reader, namespace, name string) (*appView, error) {
	ap := &policyhubv1.ApplicationPolicy{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ap); err != nil {
		return nil, err
	}
	clusters, err := clusterStates(ctx, hub, namespace, policyhubv1.KindApplicationPolicy, ap)
	if err != nil {
		return nil, err
	}
	return &appView{ApplicationPolicy: ap, Clusters: clusters}, nil
}

// waitFleetPolicy polls the FleetPolicy until check accepts it, and returns it.
func waitFleetPolicy(t *testing.T, name, what string, check func(*fleetView) error) *fleetView {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var fp *fleetView
	eventually(t, 90*time.Second, 200*time.Millisecond, what, func() error {
		var err error
		if fp, err = fleetPolicyWithClusters(testContext(t), hub, name); err != nil {
			return err
		}
		if fp.Status.ObservedGeneration != fp.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d", fp.Status.ObservedGeneration, fp.Generation)
		}
		return check(fp)
	})
	return fp
}

// clusterPhases maps cluster → phase from a FleetPolicy's status.
func clusterPhases(fp *fleetView) map[string]policyhubv1.ClusterPhase {
	phases := map[string]policyhubv1.ClusterPhase{}
	for _, c := range fp.Clusters {
		phases[c.Name] = c.Phase
	}
	return phases
}

// wantPhases returns a check that the FleetPolicy's clusters have exactly these phases.
func wantPhases(want map[string]policyhubv1.ClusterPhase) func(*fleetView) error {
	return func(fp *fleetView) error {
		got := clusterPhases(fp)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("cluster phases %v, want %v (status %+v)", got, want, fp.Status.Conditions)
		}
		return nil
	}
}

// indentedSpec is auditTemplate's spec as a YAML flow mapping, to embed in a FleetPolicy manifest.
func indentedSpec(scope string) string {
	tmpl := map[string]any{}
	if err := yaml.Unmarshal([]byte(auditTemplate(scope)), &tmpl); err != nil {
		panic(err)
	}
	out, err := json.Marshal(tmpl["spec"])
	if err != nil {
		panic(err)
	}
	return string(out)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// syncOps reads the hub's policyhub_sync_operations_total for a cluster and action.
func (h *testHub) syncOps(t *testing.T, cluster, action string) float64 {
	t.Helper()
	return h.counter(t, "policyhub_sync_operations_total", map[string]string{"cluster": cluster, "action": action})
}

// renders reads the hub's policyhub_declaration_renders_total for a declaration kind.
func (h *testHub) renders(t *testing.T, kind string) float64 {
	t.Helper()
	return h.counter(t, "policyhub_declaration_renders_total", map[string]string{"kind": kind})
}

// counter reads the hub's counter metric of the series with labels (0 when there is none yet).
func (h *testHub) counter(t *testing.T, metric string, labels map[string]string) float64 {
	t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func findCondition(fp *fleetView, kind string) *metav1.Condition {
	for i := range fp.Status.Conditions {
		if fp.Status.Conditions[i].Type == kind {
			return &fp.Status.Conditions[i]
		}
	}
	return nil
}

func unmarshalJSON(data []byte, v any) error { return json.Unmarshal(data, v) }

func marshalJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

// allInForce is a waitFleetPolicy check: every cluster of the status is Synced with the policy in
// force (Kyverno says it is ready), and there is at least one.
func allInForce(fp *fleetView) error {
	for _, c := range fp.Clusters {
		if c.Phase != policyhubv1.ClusterPhaseSynced || c.InForce == nil || !*c.InForce {
			return fmt.Errorf("%s: phase %s, inForce %v", c.Name, c.Phase, c.InForce)
		}
	}
	if len(fp.Clusters) == 0 {
		return fmt.Errorf("no clusters in status")
	}
	return nil
}
