package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// A FleetPolicy placed on more clusters than its status names keeps a bounded status — counts,
// conditions, the 20 clusters that need attention most and a count of the rest — while its state
// in every cluster is in ClusterStatusSlices (10 clusters each on the test hub), and
// `kubectl policyhub status NAME` lists every cluster with its phase.
func TestHubStatusStaysBoundedBeyondItsAttentionList(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const refusing = 24 // with cluster-1: 25 clusters, more than the 20 the attention list names
	placed := []string{"cluster-1"}
	for i := range refusing {
		url, err := fleet.RefusingURL()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("bounded-%02d", i)
		if err := fleetOf(t).AddClusterSecret(ctx, name, url, "cluster-2", nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleetOf(t).RemoveClusterSecret(context.Background(), name) })
		placed = append(placed, name)
	}
	name := "e2e-bounded"
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [%s]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("bounded"), name, strings.Join(placed, ", ")))

	fp := waitFleetPolicy(t, name, "cluster-1 synced, the refusing clusters failed", func(fp *fleetView) error {
		s := fp.Status.Summary
		if s.Clusters != 25 || s.Synced != 1 || s.Failed != refusing {
			return fmt.Errorf("summary: %d clusters, %d synced, %d failed", s.Clusters, s.Synced, s.Failed)
		}
		if len(fp.Clusters) != 25 {
			return fmt.Errorf("%d clusters in the slices, want 25", len(fp.Clusters))
		}
		return nil
	})
	s := fp.Status.Summary
	if len(s.Attention) != policyhubv1.MaxAttention || s.AttentionOmitted != refusing-policyhubv1.MaxAttention {
		t.Errorf("attention names %d clusters and omits %d; want %d and %d", len(s.Attention), s.AttentionOmitted, policyhubv1.MaxAttention, refusing-policyhubv1.MaxAttention)
	}
	for _, a := range s.Attention {
		if a.Phase != policyhubv1.ClusterPhaseFailed || !strings.HasPrefix(a.Name, "bounded-") || a.Message == "" {
			t.Errorf("attention entry %+v: want a refusing cluster, Failed, with its reason", a)
		}
	}
	raw, err := json.Marshal(fp.Status)
	if err != nil {
		t.Fatal(err)
	}
	// 25 clusters' entries alone would be ~6 KiB with their reasons; the bounded status holds 20
	// short ones and the counts, whatever the number of clusters.
	t.Logf("status of 25 clusters: %d bytes", len(raw))
	if ready := findCondition(fp, policyhubv1.ConditionReady); ready == nil || ready.Reason != string(policyhubv1.ClusterPhaseFailed) || !strings.Contains(ready.Message, "and 4 more") {
		t.Errorf("Ready %+v: want Failed, naming 20 clusters and 4 more", ready)
	}

	slices := &policyhubv1.ClusterStatusSliceList{}
	if err := directClient(t, fleetOf(t).Hub.Config).List(ctx, slices, client.InNamespace(e2eHubNamespace),
		client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(fp.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 3 {
		t.Errorf("%d ClusterStatusSlices, want 3 of at most 10 clusters", len(slices.Items))
	}
	for _, sl := range slices.Items {
		if len(sl.Clusters) > 10 || sl.Declaration.Name != name || len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != fp.UID {
			t.Errorf("slice %s: %d clusters, declaration %+v, owners %+v", sl.Name, len(sl.Clusters), sl.Declaration, sl.OwnerReferences)
		}
	}

	code, out, errOut := cliReadRun(t, "status", name, "-o", "json")
	if code != 0 {
		t.Fatalf("kubectl policyhub status %s: exit %d: %s", name, code, errOut)
	}
	var report struct {
		Declarations []struct {
			Clusters []struct{ Name, Phase string } `json:"clusters"`
		} `json:"declarations"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || len(report.Declarations) != 1 {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	phases := map[string]string{}
	for _, c := range report.Declarations[0].Clusters {
		phases[c.Name] = c.Phase
	}
	for _, c := range placed {
		want := string(policyhubv1.ClusterPhaseFailed)
		if c == "cluster-1" {
			want = string(policyhubv1.ClusterPhaseSynced)
		}
		if phases[c] != want {
			t.Errorf("kubectl policyhub status lists %s as %q, want %s", c, phases[c], want)
		}
	}

	// Deleted, the FleetPolicy takes its slices with it (no garbage collector runs here). The
	// refusing clusters cannot be pruned: they leave the fleet first.
	for _, c := range placed[1:] {
		if err := fleetOf(t).RemoveClusterSecret(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Delete(ctx, fp.FleetPolicy); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "the FleetPolicy and its slices gone", func() error {
		left := &policyhubv1.ClusterStatusSliceList{}
		if err := hub.List(ctx, left, client.InNamespace(e2eHubNamespace), client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(fp.UID)}); err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("%d slices left", len(left.Items))
		}
		return nil
	})
}
