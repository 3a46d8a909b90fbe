package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// The managed-by label is public: a cluster admin who puts it on more objects than one cluster's
// cache may keep does not grow the hub without bound. The cluster is Failed, saying how many it
// holds, its cache is dropped, and nothing is written there; once the objects are gone it syncs.
func TestSyncRefusesAClusterFloodedWithOwnedObjects(t *testing.T) {
	ctx := testContext(t)
	const hubID, limit = "e2e-flood-hub", 3
	s, err := work.NewSyncer(work.Options{HubID: hubID, Lock: lockOptions(hubID + "/test"), MaxOwnedObjects: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	direct := directClient(t, testFleet.Cluster("cluster-1").Config)
	var flood []*unstructured.Unstructured
	for i := range limit + 2 {
		obj := object(t, auditTemplate(fmt.Sprintf("flood-%d", i)))
		obj.SetName(fmt.Sprintf("e2e-flood-%d", i))
		obj.SetLabels(map[string]string{policyhubv1.LabelManagedBy: hubID})
		if err := direct.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		flood = append(flood, obj)
		t.Cleanup(func() { _ = direct.Delete(context.Background(), obj) })
	}

	wanted, _ := renderFleetPolicy(t, "e2e-flood-wanted", auditTemplate("flood-wanted"), nil)
	wanted.SetLabels(map[string]string{policyhubv1.LabelManagedBy: hubID})
	decl := work.Declaration{Source: "FleetPolicy/e2e-flood-wanted", Objects: []*unstructured.Unstructured{wanted}, Prune: true}
	d := onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), []work.Declaration{decl}), policyhubv1.ClusterPhaseFailed)
	if !strings.Contains(d.Message, fmt.Sprintf("holds %d objects labelled as this hub's", limit+2)) {
		t.Errorf("message %q, want the count", d.Message)
	}
	if _, err := liveObject(t, "cluster-1", wanted); err == nil {
		t.Error("the hub wrote to a cluster it refused")
	}

	for _, obj := range flood {
		if err := direct.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), []work.Declaration{decl}), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() {
		s.Sync(context.Background(), gatewayCluster(t, "cluster-1"), []work.Declaration{{Source: decl.Source, Prune: true}})
	})
}
