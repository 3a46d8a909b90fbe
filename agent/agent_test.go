package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/policyhub/policyhub/agent/collect"
	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// writes counts the hub writes the agent's Pusher asks for (what they do on a real hub is tested
// in e2e).
type writes struct {
	renewals, summaries atomic.Int64
}

func (w *writes) Renew(context.Context, time.Time, time.Duration) error {
	w.renewals.Add(1)
	return nil
}
func (w *writes) Summary(context.Context, policyhubv1.PolicyReportSummarySpec, time.Time) (push.PacingRead, error) {
	w.summaries.Add(1)
	return push.PacingRead{}, nil
}
func (w *writes) Pacing(context.Context) (push.PacingRead, bool, error) {
	return push.PacingRead{}, false, nil
}

// readAt is a collector whose first full read ends when the test says so.
type readAt struct {
	synced  atomic.Bool
	changed chan struct{}
}

func (f *readAt) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *readAt) Synced() bool                  { return f.synced.Load() }
func (f *readAt) Changed() <-chan struct{}      { return f.changed }
func (f *readAt) Snapshot() collect.Snapshot    { return collect.Snapshot{} }

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
				hub := &writes{}
				o := Options{Cluster: "cluster-1", SyncTimeout: 2 * time.Minute}
				pusher, err := push.NewWith(hub, push.Options{Cluster: o.Cluster})
				if err != nil {
					t.Fatal(err)
				}
				src := &readAt{changed: make(chan struct{}, 1)}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- run(ctx, o, pusher, src) }()

				synctest.Wait()
				if pusher.Renewals() != 1 || pusher.Pushes() != 0 {
					t.Errorf("at start: %d renewals, %d pushes; want the Lease renewed and no summary yet", pusher.Renewals(), pusher.Pushes())
				}
				if hub.renewals.Load() != 1 || hub.summaries.Load() != 0 {
					t.Errorf("at start: %d Lease and %d summary writes asked for; want 1 and 0", hub.renewals.Load(), hub.summaries.Load())
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
