package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `kubectl policyhub inventory` lists each cluster's Kyverno legacy objects from what the real
// agents report: a ClusterPolicy the hub ships (owner policyhub) and one created in the cluster by
// hand (owner other) in cluster-1, a Policy created by hand in cluster-2; both clusters would fail
// Kyverno 1.20's upgrade gate, with the reason; --cluster narrows the list and an unknown name is
// an error. Once the objects are removed (the FleetPolicy deleted, the others deleted in the
// clusters), the counts reach 0, the table says the gate passes, and the command exits 0.
func TestCLIInventoryListsOwnedAndUnownedLegacyObjects(t *testing.T) {
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	const ns = "cli-inventory"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	// The clusters are shared by the tests: the earlier tests' legacy objects must be gone first.
	inventoryEventually(t, "both clusters report no legacy object before the test's", func(r inventoryJSON) error {
		return r.wantCounts(map[string][2]int64{"cluster-1": {0, 0}, "cluster-2": {0, 0}})
	})

	owned := createFleetPolicy(t, `
metadata: {name: e2e-inventory-owned}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec:
      background: false
      rules:
      - name: audit-configmaps
        match: {any: [{resources: {kinds: [ConfigMap], namespaces: [cli-inventory]}}]}
        validate: {failureAction: Audit, message: "audit only", pattern: {metadata: {name: "?*"}}}
`)
	waitFleetPolicy(t, owned.Name, "in force in cluster-1", allInForce)
	unownedCP := legacyObject(ctx, t, c1, "ClusterPolicy", "", "e2e-inventory-unowned")
	unownedP := legacyObject(ctx, t, c2, "Policy", ns, "e2e-inventory-unowned-ns")

	var listed inventoryJSON
	inventoryEventually(t, "cluster-1: 1 owned and 1 unowned ClusterPolicy; cluster-2: 1 unowned Policy", func(r inventoryJSON) error {
		listed = r
		return r.wantCounts(map[string][2]int64{"cluster-1": {1, 1}, "cluster-2": {0, 1}})
	})
	c1Report, c2Report := listed.cluster("cluster-1"), listed.cluster("cluster-2")
	for _, want := range []inventoryObject{
		{Kind: "ClusterPolicy", Name: "e2e-inventory-unowned", Owner: "other"},
		{Kind: "ClusterPolicy", Name: owned.Name, Owner: "policyhub"},
	} {
		if !slices.Contains(c1Report.Objects, want) {
			t.Errorf("cluster-1 does not name %+v: %+v", want, c1Report.Objects)
		}
	}
	if c1Report.Objects[0].Owner != "other" {
		t.Errorf("cluster-1 names the objects policyhub does not own first: %+v", c1Report.Objects)
	}
	if want := (inventoryObject{Kind: "Policy", Namespace: ns, Name: "e2e-inventory-unowned-ns", Owner: "other"}); !slices.Contains(c2Report.Objects, want) {
		t.Errorf("cluster-2 does not name %+v: %+v", want, c2Report.Objects)
	}
	for _, c := range []inventoryClusterJSON{c1Report, c2Report} {
		if !c.UpgradeBlocked || !strings.Contains(c.Reason, "Kyverno 1.20") || !strings.Contains(c.Reason, "(other)") {
			t.Errorf("%s: upgradeBlocked %v, reason %q: want it blocked, saying why", c.Name, c.UpgradeBlocked, c.Reason)
		}
	}
	if listed.Total.LegacyObjects != 3 || listed.Total.Policyhub != 1 || listed.Total.Other != 2 || listed.UpgradeBlocked != 2 {
		t.Errorf("fleet total %+v, %d blocked: want 3 (1 policyhub, 2 other), 2 blocked", listed.Total, listed.UpgradeBlocked)
	}

	// The two clusters with an agent (cluster-3 has none here: its row would say unknown).
	code, table, stderr := cliReadRun(t, "inventory", "--cluster", "cluster-1,cluster-2")
	if code != 1 {
		t.Errorf("inventory with legacy objects: exit %d, want 1; stderr %s", code, stderr)
	}
	for _, line := range []string{"TOTAL", " would-fail\n", "2-would-fail,0-unknown", "ClusterPolicy=1(other),ClusterPolicy=1(policyhub)", "Policy=1(other)",
		"e2e-inventory-unowned", "e2e-inventory-unowned-ns", "Why:"} {
		if !strings.Contains(table, line) {
			t.Errorf("the table does not show %q:\n%s", line, table)
		}
	}
	code, out, _ := cliReadRun(t, "inventory", "--cluster", "cluster-2", "-o", "json")
	var only inventoryJSON
	if err := json.Unmarshal([]byte(out), &only); err != nil || code != 1 || len(only.Clusters) != 1 || only.Clusters[0].Name != "cluster-2" {
		t.Errorf("--cluster cluster-2: exit %d, %v, %s", code, err, out)
	}
	if code, _, stderr := cliReadRun(t, "inventory", "--cluster", "no-such-cluster"); code != 2 || !strings.Contains(stderr, "no-such-cluster") {
		t.Errorf("--cluster no-such-cluster: exit %d, stderr %q: want 2 naming it", code, stderr)
	}

	// Removed: the hub prunes its own when the FleetPolicy goes; the others are deleted by hand.
	if err := directClient(t, fleetOf(t).Hub.Config).Delete(ctx, owned); err != nil {
		t.Fatal(err)
	}
	for c, obj := range map[client.Client]*unstructured.Unstructured{c1: unownedCP, c2: unownedP} {
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	inventoryEventually(t, "both clusters' counts back to 0", func(r inventoryJSON) error {
		if err := r.wantCounts(map[string][2]int64{"cluster-1": {0, 0}, "cluster-2": {0, 0}}); err != nil {
			return err
		}
		if c := r.cluster("cluster-1"); c.UpgradeBlocked || len(c.Objects) != 0 {
			return fmt.Errorf("cluster-1 still blocked or naming %+v", c.Objects)
		}
		return nil
	})
	code, table, _ = cliReadRun(t, "inventory", "--cluster", "cluster-1,cluster-2")
	if code != 0 || strings.Contains(table, " would-fail\n") || strings.Count(table, " passes\n") != 2 || strings.Contains(table, "Legacy objects") {
		t.Errorf("no legacy object left: exit %d, want 0 and the gate passing:\n%s", code, table)
	}
}

// inventoryJSON is `kubectl policyhub inventory -o json`, as a script reads it.
type inventoryJSON struct {
	Clusters []inventoryClusterJSON `json:"clusters"`
	Total    struct {
		LegacyObjects int64 `json:"legacyObjects"`
		Policyhub     int64 `json:"policyhub"`
		Other         int64 `json:"other"`
	} `json:"total"`
	UpgradeBlocked int `json:"upgradeBlocked"`
	Unknown        int `json:"unknown"`
}

type inventoryClusterJSON struct {
	Name           string            `json:"name"`
	Known          bool              `json:"known"`
	Policyhub      int64             `json:"policyhub"`
	Other          int64             `json:"other"`
	Objects        []inventoryObject `json:"objects"`
	UpgradeBlocked bool              `json:"upgradeBlocked"`
	Reason         string            `json:"reason"`
}

type inventoryObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Owner     string `json:"owner"`
}

func (r inventoryJSON) cluster(name string) inventoryClusterJSON {
	for _, c := range r.Clusters {
		if c.Name == name {
			return c
		}
	}
	return inventoryClusterJSON{Name: name}
}

// wantCounts checks the clusters' counts, {policyhub, other} by cluster, each known.
func (r inventoryJSON) wantCounts(want map[string][2]int64) error {
	for name, counts := range want {
		c := r.cluster(name)
		if !c.Known || c.Policyhub != counts[0] || c.Other != counts[1] {
			return fmt.Errorf("%s: known %v, policyhub %d, other %d (objects %+v); want policyhub %d, other %d",
				name, c.Known, c.Policyhub, c.Other, c.Objects, counts[0], counts[1])
		}
	}
	return nil
}

// inventoryEventually runs `kubectl policyhub inventory -o json` until check passes.
func inventoryEventually(t *testing.T, what string, check func(inventoryJSON) error) {
	t.Helper()
	eventually(t, 90*time.Second, 500*time.Millisecond, what, func() error {
		code, out, stderr := cliReadRun(t, "inventory", "-o", "json")
		if code == 2 {
			return fmt.Errorf("exit 2: %s", stderr)
		}
		var r inventoryJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return check(r)
	})
}

// legacyObject creates a kyverno.io/v1 legacy policy (ClusterPolicy, or Policy in namespace) in
// a cluster, as a team would by hand: not policyhub's. It is deleted when the test ends.
func legacyObject(ctx context.Context, t *testing.T, c client.Client, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	obj := object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: %s
metadata: {name: %s}
spec:
  background: false
  rules:
  - name: audit-secrets
    match: {any: [{resources: {kinds: [Secret]}}]}
    validate: {failureAction: Audit, message: "audit only", pattern: {metadata: {name: "?*"}}}
`, kind, name))
	obj.SetNamespace(namespace)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", kind, name, err)
		}
	})
	return obj
}
