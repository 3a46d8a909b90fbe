package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// The Enforce application of the workflow test, in Audit: the workflow deploys the violating
// component; the agent's results for it reach the Application's status.policy entry and
// `kubectl policyhub info`, and stay in status.policy across vela-core's own reconciles (every
// 10 s in the fleet).
func TestKubeVelaAuditEntryReportsTheDeployedViolation(t *testing.T) {
	inLane(t, "kubevela")
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	ctx := testContext(t)
	const ns = "kv-audit"
	hub := directClient(t, fleetOf(t).Hub.Config)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, cluster1, ns)
	applyKubeVelaDefinitions(ctx, t, hub)
	manifest := strings.Replace(fmt.Sprintf(velaGate, ns), "mode: Enforce", "mode: Audit", 1)
	if !strings.Contains(manifest, "mode: Audit") {
		t.Fatal("the gate Application has no mode to turn to Audit")
	}
	vela := createVelaApplication(ctx, t, hub, manifest)

	eventually(t, 120*time.Second, 200*time.Millisecond, "the violating component deployed in Audit", func() error {
		d := &appsv1.Deployment{}
		if err := cluster1.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
			return err
		}
		if image := d.Spec.Template.Spec.Containers[0].Image; image != "nginx:latest" {
			return fmt.Errorf("image %s", image)
		}
		return nil
	})

	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	reported := func() error {
		status, err := velaEntryStatus(ctx, hub, vela, live, "no-latest")
		if err != nil {
			return err
		}
		byCluster, _ := status["violationsByCluster"].(map[string]any)
		if status["violations"] != int64(1) || byCluster["cluster-1"] != int64(1) {
			return fmt.Errorf("entry status %v, want the one violation in cluster-1", status)
		}
		return nil
	}
	eventually(t, 3*time.Minute, time.Second, "the deployed violation in the Application's status.policy", reported)
	if phase, _, _ := unstructured.NestedString(live.Object, "status", "status"); phase != "running" {
		t.Errorf("the Application is %q, want running: an Audit entry blocks nothing", phase)
	}

	code, out, errOut := cliReadRun(t, "info", "gate", "-n", ns, "-o", "json")
	if code != app.ExitFindings {
		t.Fatalf("kubectl policyhub info gate: exit %d (want %d, violations found), stderr %q", code, app.ExitFindings, errOut)
	}
	type result struct {
		Cluster string `json:"cluster"`
		Policy  string `json:"policy"`
		Results struct {
			Fail int64 `json:"fail"`
		} `json:"results"`
	}
	var info struct {
		ApplicationPolicies []string `json:"applicationPolicies"`
		Results             []result `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info -o json: %v\n%s", err, out)
	}
	found := slices.ContainsFunc(info.Results, func(r result) bool {
		return r.Cluster == "cluster-1" && r.Policy == ns+"/"+policyhubv1.KubeVelaEntryName("gate", "no-latest") && r.Results.Fail == 1
	})
	if !slices.Contains(info.ApplicationPolicies, policyhubv1.KubeVelaEntryName("gate", "no-latest")) || !found {
		t.Errorf("kubectl policyhub info gate -n %s does not show the entry's failure in cluster-1:\n%s", ns, out)
	}

	// vela-core reconciles the Application every 10 s here: the entry's results stay through
	// several of them.
	holds(t, 25*time.Second, "the results in status.policy across vela-core's reconciles", reported)
}
