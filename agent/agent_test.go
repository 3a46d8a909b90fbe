package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/policyhub/policyhub/agent/collect"
	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// fakeSource is a collector whose first full read ends when the test says so.
type fakeSource struct {
	synced  atomic.Bool
	changed chan struct{}
}

func (f *fakeSource) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeSource) Synced() bool                  { return f.synced.Load() }
func (f *fakeSource) Changed() <-chan struct{}      { return f.changed }
func (f *fakeSource) Snapshot() collect.Snapshot    { return collect.Snapshot{} }

// A (re)started agent renews its Lease at once, before the cluster is read; its summary follows
// the first full read (or SyncTimeout), so an empty summary never claims a clean cluster.
func TestLeaseRenewedBeforeTheClusterIsRead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		synced   bool          // the read ends at pushedAt, or never
		pushedAt time.Duration // when the summary is due
	}{
		{"read after 30s", true, 30 * time.Second},
		{"never read: pushed at the sync timeout", false, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				scheme := runtime.NewScheme()
				if err := policyhubv1.AddToScheme(scheme); err != nil {
					t.Fatal(err)
				}
				if err := coordinationv1.AddToScheme(scheme); err != nil {
					t.Fatal(err)
				}
				hub := fake.NewClientBuilder().WithScheme(scheme).Build()
				o := Options{Cluster: "cluster-1", SyncTimeout: 2 * time.Minute}
				pusher, err := push.New(hub, push.Options{Cluster: o.Cluster})
				if err != nil {
					t.Fatal(err)
				}
				src := &fakeSource{changed: make(chan struct{}, 1)}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- run(ctx, o, pusher, src) }()

				synctest.Wait()
				if pusher.Renewals() != 1 || pusher.Pushes() != 0 {
					t.Errorf("at start: %d renewals, %d pushes; want the Lease renewed and no summary yet", pusher.Renewals(), pusher.Pushes())
				}
				if err := hub.Get(ctx, client.ObjectKey{Namespace: o.Cluster, Name: push.LeaseName}, &coordinationv1.Lease{}); err != nil {
					t.Errorf("the Lease on the hub at start: %v", err)
				}
				time.Sleep(tc.pushedAt - time.Millisecond)
				synctest.Wait()
				if pusher.Pushes() != 0 {
					t.Errorf("pushed before the cluster was read (or the timeout passed)")
				}
				if tc.synced {
					src.synced.Store(true)
				}
				time.Sleep(200 * time.Millisecond) // waitSynced polls every 100ms
				synctest.Wait()
				if pusher.Pushes() != 1 {
					t.Errorf("%d pushes once the cluster was read (or the timeout passed), want 1", pusher.Pushes())
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			})
		})
	}
}
