package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/policyhub/policyhub/internal/charttest"
)

// The hub chart's FlowSchema, installed on the real hub apiserver, puts the hub's own Lease
// requests (replica membership, leader election) at the leader-election priority level, as
// Kubernetes' controllers' are, so that the hub's other requests at a big fleet cannot queue them
// past their renew deadline; the hub's other requests, and Leases elsewhere, are not. Judged by
// the API server's own answer: every response names the FlowSchema and priority level that
// classified the request (X-Kubernetes-PF-FlowSchema-UID, -PriorityLevel-UID).
func TestChartHubLeasesAtLeaderElectionPriority(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	ns := chartNamespace(ctx, t, hub, "charts-leases")
	name := chartTestName("charts-leases")
	r := mustRender(t, hubChartDir, "policyhub-hub", ns, charttest.Values(t, fmt.Sprintf(`{fullnameOverride: %s}`, name)))
	chartInstall(ctx, t, hub, r, "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "FlowSchema")
	sa := r.One(t, "ServiceAccount").GetName()

	admin, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := admin.FlowcontrolV1().FlowSchemas().Get(ctx, r.One(t, "FlowSchema").GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	level, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The hub's ServiceAccount, as the apiserver authenticates it (impersonated by the fleet's
	// admin), its responses' classification recorded.
	seen := &flowHeaders{}
	cfg := rest.CopyConfig(fleetOf(t).Hub.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cfg.WrapTransport = seen.wrap
	asHub, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	classified := func(what string, request func(context.Context) error) (flowSchema, priorityLevel string) {
		t.Helper()
		seen.reset()
		if err := request(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return seen.last()
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policyhub-replica"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a"), LeaseDurationSeconds: ptr.To(int32(15))}}
	for _, c := range []struct {
		what    string
		request func(context.Context) error
	}{
		{"create the replica Lease", func(ctx context.Context) error {
			_, err := asHub.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{})
			return err
		}},
		{"get it", func(ctx context.Context) error {
			var err error
			lease, err = asHub.CoordinationV1().Leases(ns).Get(ctx, lease.Name, metav1.GetOptions{})
			return err
		}},
		{"renew it", func(ctx context.Context) error {
			now := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &now
			_, err := asHub.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{})
			return err
		}},
	} {
		if fs, pl := classified(c.what, c.request); fs != string(schema.UID) || pl != string(level.UID) {
			t.Errorf("%s: classified by FlowSchema %s at priority level %s, want %s (%s) at leader-election (%s)", c.what, fs, pl, schema.UID, schema.Name, level.UID)
		}
	}
	// The rest of the hub's requests keep their usual level.
	if fs, pl := classified("list the hub's ConfigMaps", func(ctx context.Context) error {
		_, err := asHub.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	}); fs == string(schema.UID) || pl == string(level.UID) {
		t.Errorf("the hub's list of ConfigMaps was classified by the Leases' FlowSchema (%s) or at leader-election (%s)", fs, pl)
	}
	if err := asHub.CoordinationV1().Leases(ns).Delete(ctx, lease.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// flowHeaders records the API Priority and Fairness classification of the last response.
type flowHeaders struct {
	mu                        sync.Mutex
	flowSchema, priorityLevel string
}

func (f *flowHeaders) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			f.mu.Lock()
			f.flowSchema, f.priorityLevel = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *flowHeaders) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flowSchema, f.priorityLevel = "", ""
}

func (f *flowHeaders) last() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flowSchema, f.priorityLevel
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
