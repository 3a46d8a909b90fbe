package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
	"github.com/policyhub/policyhub/hub/work"
)

// -update rewrites the CLI golden files in testdata/cli from the current output. Other files of
// this package may define the same flag (a package-level flag.Bool runs before init): then it is
// shared.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")
	}
}

func syncCheckUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// syncCheckRun runs kubectl-policyhub in-process against the fleet's hub (hub id e2e-hub) and
// returns its exit code, stdout and stderr.
func syncCheckRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--kubeconfig", fleetOf(t).Hub.Kubeconfig, "--hub-id", e2eHubID, "--gateway-secret-namespace", fleetOf(t).SecretNamespace}, args...)
	code := app.Run(testContext(t), full, app.Streams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// syncCheckVolatile are the parts of the CLI's output that change from run to run.
var syncCheckVolatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`(resourceVersion"?:\s*)"?\d+"?`), `${1}<rv>`},
}

// syncCheckGolden compares the output, its volatile parts normalised, with testdata/cli/name.
func syncCheckGolden(t *testing.T, name, got string) {
	t.Helper()
	for _, v := range syncCheckVolatile {
		got = v.re.ReplaceAllString(got, v.with)
	}
	path := filepath.Join("testdata", "cli", name)
	if syncCheckUpdating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -run '%s' -update to write it)", err, t.Name())
	}
	if string(want) != got {
		diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(want)), B: difflib.SplitLines(got), FromFile: path, ToFile: "output", Context: 3})
		t.Errorf("the output differs from %s (rerun with -update if the change is intended):\n%s", path, diff)
	}
}

// syncCLIReport is the shape of `sync --dry-run -o json`, as a script reads it.
type syncCLIReport struct {
	Clusters []struct {
		Name         string `json:"name"`
		Error        string `json:"error"`
		Declarations []struct {
			Declaration string                      `json:"declaration"`
			Phase       string                      `json:"phase"`
			Message     string                      `json:"message"`
			Actions     policyhubv1.ActionCounts    `json:"actions"`
			Changes     []policyhubv1.PlannedChange `json:"changes"`
		} `json:"declarations"`
	} `json:"clusters"`
}

// syncCLIFleetPolicy is a harmless Audit FleetPolicy for both clusters; version shows in its message.
func syncCLIFleetPolicy(name, version string) *policyhubv1.FleetPolicy {
	fp := &policyhubv1.FleetPolicy{}
	manifest := fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec:
      background: false
      rules:
      - name: configmaps-need-owner
        match:
          any:
          - resources:
              kinds: [ConfigMap]
              selector:
                matchLabels:
                  policyhub.io/e2e: cli-sync
        validate:
          failureAction: Audit
          message: "configmaps need an owner label (%s)"
          pattern:
            metadata:
              labels:
                owner: "?*"
`, name, version)
	if err := yaml.Unmarshal([]byte(manifest), fp); err != nil {
		panic(err)
	}
	return fp
}

// syncCLICreate creates a FleetPolicy while no hub runs. The hub adds its finalizer once it runs;
// the cleanup only deletes (a FleetPolicy no hub ever saw goes at once). A test that starts a hub
// afterwards registers syncCLIDeleteWithHub after it, so the deletion is pruned while it runs.
func syncCLICreate(t *testing.T, fp *policyhubv1.FleetPolicy) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Create(testContext(t), fp); err != nil {
		t.Fatalf("create FleetPolicy %s: %v", fp.Name, err)
	}
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(hub.Delete(context.Background(), &policyhubv1.FleetPolicy{ObjectMeta: fp.ObjectMeta}))
	})
}

// syncCLIDeleteWithHub deletes the FleetPolicy when the test ends, before the hub registered
// earlier stops, and waits until the hub pruned it and let it go.
func syncCLIDeleteWithHub(t *testing.T, name string) {
	t.Helper()
	t.Cleanup(func() { deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
}

// syncCLIVersions is the resourceVersion of everything a sync could write in both clusters: the
// e2e hub's Kyverno policies, the sync Lease and its namespace.
func syncCLIVersions(t *testing.T) map[string]string {
	t.Helper()
	ctx := testContext(t)
	out := map[string]string{}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		c := directClient(t, fleetOf(t).Cluster(cluster).Config)
		for _, gk := range work.PolicyKinds {
			mapping, err := c.RESTMapper().RESTMapping(gk)
			if err != nil {
				continue // not served
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
			if err := c.List(ctx, list, client.MatchingLabels{policyhubv1.LabelManagedBy: e2eHubID}); err != nil {
				t.Fatalf("%s: list %s: %v", cluster, gk, err)
			}
			for _, item := range list.Items {
				out[fmt.Sprintf("%s %s %s/%s", cluster, gk, item.GetNamespace(), item.GetName())] = item.GetResourceVersion()
			}
		}
		out[cluster+" Lease"] = leaseVersion(t, cluster)
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: work.LeaseNamespace}, ns); err == nil {
			out[cluster+" Namespace "+work.LeaseNamespace] = ns.ResourceVersion
		}
	}
	return out
}

// syncCLIKyvernoReady waits until Kyverno has marked the ClusterPolicy Ready in both clusters:
// after that Kyverno leaves it alone, so its resourceVersion only moves when someone writes it.
func syncCLIKyvernoReady(t *testing.T, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	obj.SetName(name)
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		eventually(t, 60*time.Second, 200*time.Millisecond, "Kyverno marks "+name+" Ready in "+cluster, func() error {
			live, err := liveObject(t, cluster, obj)
			if err != nil {
				return err
			}
			conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			for _, c := range conditions {
				if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("status %v", live.Object["status"])
		})
	}
}

// dryRunJSON runs `sync --dry-run -o json` and decodes it.
func syncCLIDryRunJSON(t *testing.T, args ...string) (syncCLIReport, string) {
	t.Helper()
	code, out, errOut := syncCheckRun(t, "", append([]string{"sync", "--dry-run", "-o", "json"}, args...)...)
	if code != app.ExitOK {
		t.Fatalf("sync --dry-run %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	var report syncCLIReport
	if err := unmarshalJSON([]byte(out), &report); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, out)
	}
	return report, out
}

// The CLI's dry-run plans what the hub's sync then does — a Create in each cluster, then an
// Update with the template's change in its diff — and writes nothing: every resourceVersion
// (policies, the sync Lease and its namespace) is the same after it.
func TestCLISyncDryRunMatchesTheSync(t *testing.T) {
	const name = "e2e-cli-sync"
	syncCLICreate(t, syncCLIFleetPolicy(name, "v1"))

	// No hub runs: the FleetPolicy was never synced.
	before := syncCLIVersions(t)
	report, jsonOut := syncCLIDryRunJSON(t, "--policy", name)
	planned := map[string]policyhubv1.ActionCounts{}
	for _, c := range report.Clusters {
		if c.Error != "" || len(c.Declarations) != 1 {
			t.Fatalf("%s: error %q, %d declarations", c.Name, c.Error, len(c.Declarations))
		}
		d := c.Declarations[0]
		if d.Declaration != "FleetPolicy/"+name || d.Phase != "DryRun" || len(d.Changes) != 1 || d.Changes[0].Action != "Create" ||
			!strings.Contains(d.Changes[0].Diff, "+  name: "+name) {
			t.Errorf("%s: %+v, want one Create with a diff", c.Name, d)
		}
		planned[c.Name] = d.Actions
	}
	if len(planned) != 2 || planned["cluster-1"].Created != 1 || planned["cluster-2"].Created != 1 {
		t.Fatalf("planned %+v, want a create in cluster-1 and cluster-2", planned)
	}
	syncCheckGolden(t, "sync-create.json.golden", jsonOut)
	code, table, errOut := syncCheckRun(t, "", "sync", "--dry-run", "--policy", name)
	if code != app.ExitOK || errOut != "" {
		t.Fatalf("table: exit %d, stderr %q", code, errOut)
	}
	syncCheckGolden(t, "sync-create.table.golden", table)
	if after := syncCLIVersions(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the dry-run wrote: versions before %v, after %v", before, after)
	}
	if got := presence(t, name); got["cluster-1"] || got["cluster-2"] {
		t.Fatalf("the dry-run created the policy: %v", got)
	}

	t.Run("the hub's sync does what was planned", func(t *testing.T) {
		startHub(t, time.Hour) // stops when this subtest ends
		fp := waitFleetPolicy(t, name, "synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
		for _, c := range fp.Clusters {
			if c.Actions != planned[c.Name] {
				t.Errorf("%s: the sync did %+v, the dry-run planned %+v", c.Name, c.Actions, planned[c.Name])
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// The hub is stopped: change the template, and dry-run the change.
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Template = syncCLIFleetPolicy(name, "v2").Spec.Template })
	syncCLIKyvernoReady(t, name)
	before = syncCLIVersions(t)
	report, _ = syncCLIDryRunJSON(t, "--policy", name)
	planned = map[string]policyhubv1.ActionCounts{}
	for _, c := range report.Clusters {
		d := c.Declarations[0]
		if d.Phase != "DryRun" || len(d.Changes) != 1 || d.Changes[0].Action != "Update" ||
			!strings.Contains(d.Changes[0].Diff, "-      message: configmaps need an owner label (v1)") ||
			!strings.Contains(d.Changes[0].Diff, "+      message: configmaps need an owner label (v2)") {
			t.Errorf("%s: %+v, want one Update whose diff changes the message", c.Name, d)
		}
		planned[c.Name] = d.Actions
	}
	if len(planned) != 2 || planned["cluster-1"].Updated != 1 || planned["cluster-2"].Updated != 1 {
		t.Fatalf("planned %+v, want an update in cluster-1 and cluster-2", planned)
	}
	code, table, errOut = syncCheckRun(t, "", "sync", "--dry-run", "--policy", name)
	if code != app.ExitOK || errOut != "" {
		t.Fatalf("table: exit %d, stderr %q", code, errOut)
	}
	syncCheckGolden(t, "sync-update.table.golden", table)
	if after := syncCLIVersions(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the dry-run wrote: versions before %v, after %v", before, after)
	}

	// The hub again: its sync updates, as planned.
	startHub(t, time.Hour)
	syncCLIDeleteWithHub(t, name)
	fp := waitFleetPolicy(t, name, "the update synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	for _, c := range fp.Clusters {
		if c.Actions != planned[c.Name] {
			t.Errorf("%s: the sync did %+v, the dry-run planned %+v", c.Name, c.Actions, planned[c.Name])
		}
	}
}

// A template Kyverno refuses: the dry-run shows Kyverno's admission error for it and exits 1;
// nothing is created. --cluster narrows the plan; the command line's mistakes exit 2 with one line.
func TestCLISyncDryRunShowsKyvernoRefusal(t *testing.T) {
	const name = "e2e-cli-sync-refused"
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Placement.Clusters = []string{"cluster-1", "cluster-2"}
	if err := yaml.Unmarshal([]byte(kyvernoRefusedTemplate), &fp.Spec.Template); err != nil {
		t.Fatal(err)
	}
	syncCLICreate(t, fp)

	code, out, errOut := syncCheckRun(t, "", "sync", "--dry-run", "--policy", name, "--cluster", "cluster-2")
	if code != app.ExitFindings {
		t.Fatalf("exit %d, want 1 (a planned object would be refused)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"CLUSTER cluster-2",
		"FleetPolicy/" + name + ": Failed kyverno.io/v1 ClusterPolicy " + name,
		`admission webhook "validate-policy.kyverno.svc" denied the request`,
		"wildcard policy not allowed in background mode",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cluster-1") {
		t.Errorf("--cluster cluster-2 planned cluster-1 too:\n%s", out)
	}
	syncCheckGolden(t, "sync-refused.table.golden", out)
	if got := presence(t, name); got["cluster-1"] || got["cluster-2"] {
		t.Errorf("the dry-run created the policy: %v", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sync", "--dry-run", "--cluster", "no-such-cluster"}, "error: cluster no-such-cluster is not in the inventory (clusters: "},
		{[]string{"sync", "--dry-run", "--policy", "no-such-policy"}, "error: no FleetPolicy, nor ApplicationPolicy in namespace default, is named no-such-policy"},
		{[]string{"sync", "--policy", name}, "error: the hub syncs; run `sync --dry-run` to preview"},
	} {
		code, out, errOut := syncCheckRun(t, "", tc.args...)
		if code != app.ExitError || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// An unreachable cluster is reported in its row — Failed, with the reason — while the others are
// planned; the exit code is 2 with one line naming it. check against it exits 2 with one line.
func TestCLISyncDryRunReportsAnUnreachableCluster(t *testing.T) {
	inParallel(t)
	own := useOwnFleet(t)
	const name = "e2e-cli-sync-unreachable"
	syncCLICreate(t, syncCLIFleetPolicy(name, "v1"))
	if err := own.Cluster("cluster-2").StopAPIServer(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := syncCheckRun(t, "", "sync", "--dry-run", "--policy", name, "-o", "json")
	if code != app.ExitError {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if want := "error: 1 of 2 clusters could not be planned (cluster-2); see the report\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	var report syncCLIReport
	if err := unmarshalJSON([]byte(out), &report); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, out)
	}
	if len(report.Clusters) != 2 {
		t.Fatalf("clusters %+v", report.Clusters)
	}
	if c := report.Clusters[0]; c.Name != "cluster-1" || c.Error != "" || c.Declarations[0].Phase != "DryRun" || c.Declarations[0].Actions.Created != 1 {
		t.Errorf("cluster-1 is not planned despite cluster-2: %+v", c)
	}
	if c := report.Clusters[1]; c.Name != "cluster-2" || !strings.Contains(c.Error, "cluster-2") || c.Declarations[0].Phase != "Failed" || c.Declarations[0].Message == "" {
		t.Errorf("cluster-2 is not reported Failed with its reason: %+v", c)
	}

	code, out, errOut = syncCheckRun(t, "", "sync", "--dry-run", "--policy", name)
	if code != app.ExitError || !strings.Contains(out, "CLUSTER cluster-2 — not planned: ") || !strings.Contains(out, "FleetPolicy/"+name+"  Failed") ||
		!strings.Contains(out, "FleetPolicy/"+name+": Create kyverno.io/v1 ClusterPolicy "+name) {
		t.Errorf("table: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	file := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = syncCheckRun(t, "", "check", "-f", file, "--cluster", "cluster-2")
	if code != app.ExitError || out != "" || !strings.HasPrefix(errOut, "error: cluster cluster-2 is unreachable through cluster-gateway: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("check against an unreachable cluster: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// An ApplicationPolicy without a placement of its own goes where its KubeVela Application's
// topology says (cluster-2 here): the dry-run plans its namespaced Policy there, with -n or -A.
func TestCLISyncDryRunPlansApplicationPolicies(t *testing.T) {
	ctx := testContext(t)
	const ns = "cli-sync-app"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-2").Config), ns)
	vela := object(t, fmt.Sprintf(`
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: %s}
spec:
  components: []
  policies:
  - name: where
    type: topology
    properties: {clusters: [cluster-2]}
`, ns))
	if err := hub.Create(ctx, vela); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), vela) })
	ap := &policyhubv1.ApplicationPolicy{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
metadata: {name: shop-team, namespace: %s}
spec:
  application: shop
  mode: Audit
  scope: {kinds: [Deployment]}
  rules:
  - name: need-team
    validate: {message: "shop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, ns)), ap); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, ap); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), ap)) })

	for _, scope := range [][]string{{"-n", ns}, {"-A"}} {
		report, _ := syncCLIDryRunJSON(t, append([]string{"--policy", "shop-team"}, scope...)...)
		if len(report.Clusters) != 1 || report.Clusters[0].Name != "cluster-2" || len(report.Clusters[0].Declarations) != 1 {
			t.Fatalf("%v: clusters %+v, want cluster-2 only (the application's topology)", scope, report.Clusters)
		}
		d := report.Clusters[0].Declarations[0]
		if d.Declaration != "ApplicationPolicy/"+ns+"/shop-team" || d.Phase != "DryRun" || len(d.Changes) != 1 ||
			d.Changes[0].Action != "Create" || d.Changes[0].Kind != "Policy" || d.Changes[0].Namespace != ns {
			t.Errorf("%v: %+v, want a Create of Policy %s/shop-team", scope, d, ns)
		}
	}
	code, out, errOut := syncCheckRun(t, "", "sync", "--dry-run", "-n", ns, "--policy", "shop-team")
	if code != app.ExitOK {
		t.Fatalf("table: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	syncCheckGolden(t, "sync-application.table.golden", out)
	// Without -n: the context's namespace (default) has no such ApplicationPolicy.
	code, _, errOut = syncCheckRun(t, "", "sync", "--dry-run", "--policy", "shop-team")
	if code != app.ExitError || !strings.Contains(errOut, "nor ApplicationPolicy in namespace default, is named shop-team") {
		t.Errorf("without -n: exit %d, stderr %q", code, errOut)
	}
}
