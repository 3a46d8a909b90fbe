package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
	"github.com/policyhub/policyhub/hub/gateway"
)

// -update rewrites the CLI golden files in testdata/cli from the current output. The flag may be
// defined by another file of this package too (a package-level flag.Bool runs before init): then
// it is shared.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")
	}
}

func cliReadUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// cliReadRun runs kubectl-policyhub in-process with args (against the hub unless args name
// another --kubeconfig) and returns its exit code, stdout and stderr.
func cliReadRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if !slices.Contains(args, "--kubeconfig") {
		args = append([]string{"--kubeconfig", fleetOf(t).Hub.Kubeconfig}, args...)
	}
	var out, errOut bytes.Buffer
	code := app.Run(testContext(t), args, app.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// The read commands — clusters, status, info — on a fleet in a known state, in table and JSON
// (golden files, times and ages normalised), and their one-line errors with exit code 2.
//
// The state: FleetPolicy cli-read-team (Audit, both clusters) requires a team label on the
// Deployments of namespace cli-read; ApplicationPolicy shop-team-audit (Audit, cluster-1) requires
// it of application shop's Deployments, shop-team-enforce (Enforce, cluster-2) too. Deployment web
// of shop, without the label, runs in cluster-1 (two violations) and was refused once in
// cluster-2 (one blocked admission).
func TestCLIRead(t *testing.T) {
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns = "cli-read"
	hub := directClient(t, fleetOf(t).Hub.Config)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, c2, ns)

	// The refusal first, while no Audit policy is in cluster-2: a create admitted before Kyverno
	// enforces (then deleted) leaves no report behind, and the loop stops at the first refusal,
	// so exactly one admission is blocked.
	createApplicationPolicy(t, teamApplicationPolicy("shop-team-enforce", ns, "Enforce", "cluster-2"))
	waitApplicationPolicy(t, ns, "shop-team-enforce", 90*time.Second, "synced", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))
	waitRefused(t, "cluster-2", ns, "shop Deployments need a team label")
	createFleetPolicy(t, teamLabelPolicy("cli-read-team", ns, "Audit", "cluster-1", "cluster-2"))
	createApplicationPolicy(t, teamApplicationPolicy("shop-team-audit", ns, "Audit", "cluster-1"))
	waitFleetPolicy(t, "cli-read-team", "synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	waitApplicationPolicy(t, ns, "shop-team-audit", 90*time.Second, "synced", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatalf("Audit mode must let the Deployment in: %v", err)
	}

	// The known state, as the CLI itself sees it, before any snapshot.
	eventually(t, 3*time.Minute, time.Second, "the known state through the CLI", func() error {
		return cliReadKnownState(t, ns)
	})

	for _, tc := range []struct {
		golden string
		args   []string
		code   int
		// counts masks the clusters' result counts: the shared fleet's other tests leave reports behind.
		counts bool
	}{
		{golden: "clusters-table", args: []string{"clusters", "cluster-1", "cluster-2"}, code: app.ExitOK, counts: true},
		{golden: "clusters-json", args: []string{"clusters", "cluster-1", "cluster-2", "-o", "json"}, code: app.ExitOK, counts: true},
		{golden: "status-table", args: []string{"status", "cli-read-team", "ap/shop-team-audit", "ap/shop-team-enforce", "-n", ns}, code: app.ExitFindings},
		{golden: "status-json", args: []string{"status", "cli-read-team", "ap/shop-team-audit", "ap/shop-team-enforce", "-n", ns, "-o", "json"}, code: app.ExitFindings},
		{golden: "info-table", args: []string{"info", "shop", "-n", ns}, code: app.ExitFindings},
		{golden: "info-json", args: []string{"info", "shop", "-n", ns, "-o", "json"}, code: app.ExitFindings},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errOut := cliReadRun(t, tc.args...)
			if code != tc.code || errOut != "" {
				t.Fatalf("kubectl-policyhub %s: exit %d, want %d; stderr %q\n%s", strings.Join(tc.args, " "), code, tc.code, errOut, out)
			}
			var got string
			if strings.HasSuffix(tc.golden, "-json") {
				if !json.Valid([]byte(out)) {
					t.Fatalf("not JSON:\n%s", out)
				}
				got = cliReadNormaliseJSON(out, tc.counts)
			} else {
				got = cliReadNormaliseTable(out, tc.counts)
			}
			cliReadGolden(t, tc.golden, got)
		})
	}

	t.Run("yaml is the json", func(t *testing.T) {
		for _, args := range [][]string{
			{"status", "cli-read-team", "ap/shop-team-audit", "-n", ns},
			{"info", "shop", "-n", ns},
		} {
			_, asJSON, _ := cliReadRun(t, append(args, "-o", "json")...)
			_, asYAML, _ := cliReadRun(t, append(args, "-o", "yaml")...)
			converted, err := yaml.YAMLToJSON([]byte(asYAML))
			if err != nil {
				t.Fatalf("%v: -o yaml is not YAML: %v\n%s", args, err, asYAML)
			}
			var a, b any
			if err := json.Unmarshal([]byte(asJSON), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(converted, &b); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("%v: -o yaml and -o json differ:\n%s\n%s", args, asJSON, asYAML)
			}
		}
	})

	t.Run("completion", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"__complete", "status", "-n", ns, ""}, []string{"cli-read-team", "ap/shop-team-audit", "ap/shop-team-enforce"}},
			{[]string{"__complete", "clusters", "cluster-1", ""}, []string{"cluster-2"}},
			{[]string{"__complete", "info", "-n", ns, ""}, []string{"shop"}},
		} {
			code, out, _ := cliReadRun(t, tc.args...)
			lines := strings.Split(out, "\n")
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("%v: exit %d, no %q among\n%s", tc.args, code, w, out)
				}
			}
			if slices.Contains(lines, "cluster-1") {
				t.Errorf("%v: completes a cluster already given:\n%s", tc.args, out)
			}
		}
	})

	// Without names: every FleetPolicy and the namespace's ApplicationPolicies; -A: every namespace's.
	t.Run("default selection", func(t *testing.T) {
		for _, args := range [][]string{{"status", "-n", ns}, {"status", "-A"}} {
			code, out, errOut := cliReadRun(t, append(args, "-o", "json")...)
			var report struct {
				Declarations []struct{ Kind, Namespace, Name string }
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("%v: %v (stderr %q)", args, err, errOut)
			}
			var names []string
			for _, d := range report.Declarations {
				names = append(names, d.Kind+"/"+d.Namespace+"/"+d.Name)
			}
			for _, want := range []string{"FleetPolicy//cli-read-team", "ApplicationPolicy/cli-read/shop-team-audit", "ApplicationPolicy/cli-read/shop-team-enforce"} {
				if !slices.Contains(names, want) {
					t.Errorf("%v: no %s among %v", args, want, names)
				}
			}
			if code != app.ExitFindings {
				t.Errorf("%v: exit %d with cli-read-team's violation, want 1", args, code)
			}
		}
		code, out, _ := cliReadRun(t, "status", "-n", "default", "-o", "json")
		if code == app.ExitError || strings.Contains(out, "cli-read/") {
			t.Errorf("status -n default: exit %d, shows another namespace's ApplicationPolicies:\n%s", code, out)
		}
	})

	t.Run("no violations exits 0", func(t *testing.T) {
		code, _, errOut := cliReadRun(t, "info", "nobody", "-n", ns)
		if code != app.ExitOK || !strings.Contains(errOut, "No results for application nobody in namespace cli-read") {
			t.Errorf("info of an unknown application: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			what string
			args []string
			want string
		}{
			{"unknown FleetPolicy", []string{"status", "cli-read-nope"}, `error: FleetPolicy "cli-read-nope" not found` + "\n"},
			{"unknown ApplicationPolicy", []string{"status", "ap/nope", "-n", ns}, `error: ApplicationPolicy "nope" not found in namespace "cli-read"` + "\n"},
			{"unknown cluster", []string{"clusters", "cli-read-nope"}, "error: cluster cli-read-nope is not in the inventory (clusters: cluster-1, cluster-2, cluster-3, cluster-4, cluster-5)\n"},
			{"bad -o (status)", []string{"status", "-o", "xml"}, `error: -o "xml": choose table, json or yaml (see --help)` + "\n"},
			{"bad -o (clusters)", []string{"clusters", "-o", "wide"}, `error: -o "wide": choose table, json or yaml (see --help)` + "\n"},
			{"bad -o (info)", []string{"info", "shop", "-o", "name"}, `error: -o "name": choose table, json or yaml (see --help)` + "\n"},
			{"ApplicationPolicy across namespaces", []string{"status", "ap/shop-team-audit", "-A"}, "error: ap/shop-team-audit: an ApplicationPolicy is named within one namespace: use -n, not -A (see --help)\n"},
			{"info without APP", []string{"info"}, "error: info takes one application name, got 0 arguments (see --help)\n"},
			{"unknown declaration type", []string{"status", "deploy/web"}, `error: "deploy/web": unknown type "deploy": status shows fleetpolicy (fp), policyset (pset) and applicationpolicy (ap) (see --help)` + "\n"},
		} {
			code, out, errOut := cliReadRun(t, tc.args...)
			if code != app.ExitError || errOut != tc.want || out != "" {
				t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.what, code, errOut, out, tc.want)
			}
		}
	})

	// policyhub's CRDs are installed on the hub only: a managed cluster's kubeconfig is a cluster
	// without them.
	t.Run("missing CRD", func(t *testing.T) {
		for _, args := range [][]string{{"clusters"}, {"status"}, {"info", "shop"}} {
			code, out, errOut := cliReadRun(t, append([]string{"--kubeconfig", fleetOf(t).Cluster("cluster-1").Kubeconfig}, args...)...)
			if code != app.ExitError || out != "" || strings.Count(errOut, "\n") != 1 ||
				!strings.HasPrefix(errOut, "error: the hub does not serve policyhub.io/v1alpha1: is policyhub installed on this hub?") {
				t.Errorf("%v on a cluster without policyhub: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	})

	t.Run("missing permissions", func(t *testing.T) {
		kubeconfig := cliReadNoRightsKubeconfig(t, ns)
		for _, args := range [][]string{{"clusters"}, {"status"}, {"info", "shop", "-n", ns}} {
			code, out, errOut := cliReadRun(t, append([]string{"--kubeconfig", kubeconfig}, args...)...)
			if code != app.ExitError || out != "" || strings.Count(errOut, "\n") != 1 ||
				!strings.HasPrefix(errOut, "error: permission denied: ") || !strings.Contains(errOut, "forbidden") {
				t.Errorf("%v without rights: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	})

	// An unreachable cluster is a row of `clusters` (and a warning), not an error.
	t.Run("unreachable cluster", func(t *testing.T) {
		const ghost = "cli-read-ghost"
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ghost, Namespace: fleetOf(t).SecretNamespace, Labels: map[string]string{
				gateway.CredentialTypeLabel: gateway.CredentialTypeServiceAccountToken, "env": "ghost"}},
			// Port 1 on the loopback: nothing listens, the gateway's dial is refused at once.
			StringData: map[string]string{"endpoint": "https://127.0.0.1:1", "ca.crt": string(fleetOf(t).Hub.CAData), "token": "none"},
		}
		if err := hub.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hub.Delete(context.Background(), secret) })
		code, out, errOut := cliReadRun(t, "clusters", ghost, "cluster-1")
		if code != app.ExitOK {
			t.Fatalf("exit %d, want 0; stderr %q", code, errOut)
		}
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) != 3 || !regexp.MustCompile(`^cli-read-ghost\s+no\s+-\s+<unknown>\s+<unknown>\s+<unknown>\s+unknown\s+<unknown>\s+<unknown>\s+<none>\s+-\s+-\s+-\s+-\s+env=ghost$`).MatchString(rows[1]) ||
			!regexp.MustCompile(`^cluster-1\s+yes\s`).MatchString(rows[2]) {
			t.Errorf("table:\n%s", out)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "warning: cluster cli-read-ghost is unreachable through cluster-gateway: ") {
			t.Errorf("stderr %q, want one warning line", errOut)
		}
	})
}

// cliReadKnownState checks, through the CLI's JSON, that the fleet reached the state the golden
// files show.
func cliReadKnownState(t *testing.T, ns string) error {
	t.Helper()
	type counts struct{ Pass, Fail, Warn, Error, Skip int64 }
	var info struct {
		Results []struct {
			Cluster, Policy string
			Results         counts
			Blocked         int64
			Stale           bool
		}
		TopViolations []struct {
			Cluster, Policy string
			Resource        struct{ Name string }
		}
		BlockedAdmissions []struct {
			Cluster, Policy, Message string
			Count                    int64
		}
	}
	_, out, errOut := cliReadRun(t, "info", "shop", "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return fmt.Errorf("info: %v (stderr %q)", err, errOut)
	}
	got := []string{}
	for _, r := range info.Results {
		got = append(got, fmt.Sprintf("%s/%s %+v blocked=%d stale=%v", r.Cluster, r.Policy, r.Results, r.Blocked, r.Stale))
	}
	want := []string{
		"cluster-1/cli-read-team {Pass:0 Fail:1 Warn:0 Error:0 Skip:0} blocked=0 stale=false",
		"cluster-1/cli-read/shop-team-audit {Pass:0 Fail:1 Warn:0 Error:0 Skip:0} blocked=0 stale=false",
		"cluster-2/cli-read/shop-team-enforce {Pass:0 Fail:0 Warn:0 Error:0 Skip:0} blocked=1 stale=false",
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("info results %q, want %q", got, want)
	}
	if len(info.TopViolations) != 1 || info.TopViolations[0].Resource.Name != "web" || info.TopViolations[0].Cluster != "cluster-1" {
		return fmt.Errorf("top violations %+v", info.TopViolations)
	}
	if len(info.BlockedAdmissions) != 1 || info.BlockedAdmissions[0].Count != 1 || !strings.Contains(info.BlockedAdmissions[0].Message, "shop Deployments need a team label") {
		return fmt.Errorf("blocked admissions %+v", info.BlockedAdmissions)
	}

	var status struct {
		Declarations []struct {
			Name     string
			UpToDate bool
			Ready    string
			Clusters []struct {
				Name    string
				Phase   string
				Results *counts
				Blocked int64
				Stale   bool
			}
		}
	}
	_, out, errOut = cliReadRun(t, "status", "cli-read-team", "ap/shop-team-audit", "ap/shop-team-enforce", "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		return fmt.Errorf("status: %v (stderr %q)", err, errOut)
	}
	got = []string{}
	for _, d := range status.Declarations {
		for _, c := range d.Clusters {
			res := "none"
			if c.Results != nil {
				res = fmt.Sprintf("%+v", *c.Results)
			}
			got = append(got, fmt.Sprintf("%s ready=%s upToDate=%v %s %s %s blocked=%d stale=%v", d.Name, d.Ready, d.UpToDate, c.Name, c.Phase, res, c.Blocked, c.Stale))
		}
	}
	want = []string{
		"cli-read-team ready=True upToDate=true cluster-1 Synced {Pass:0 Fail:1 Warn:0 Error:0 Skip:0} blocked=0 stale=false",
		"cli-read-team ready=True upToDate=true cluster-2 Synced {Pass:0 Fail:0 Warn:0 Error:0 Skip:0} blocked=0 stale=false",
		"shop-team-audit ready=True upToDate=true cluster-1 Synced {Pass:0 Fail:1 Warn:0 Error:0 Skip:0} blocked=0 stale=false",
		"shop-team-enforce ready=True upToDate=true cluster-2 Synced {Pass:0 Fail:0 Warn:0 Error:0 Skip:0} blocked=1 stale=false",
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("status %q, want %q", got, want)
	}
	return nil
}

// cliReadNoRightsKubeconfig writes a kubeconfig for the hub whose user, a ServiceAccount of
// namespace ns, has no rights at all.
func cliReadNoRightsKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	ctx := testContext(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli-read-nobody"}}
	if err := directClient(t, fleetOf(t).Hub.Config).Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: fleetOf(t).Hub.URL, CertificateAuthorityData: fleetOf(t).Hub.CAData}
	kc.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["nobody@hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "nobody", Namespace: ns}
	kc.CurrentContext = "nobody@hub"
	path := filepath.Join(t.TempDir(), "nobody.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	// cliReadAge is a kubectl age ("7s", "3m12s", "2d"), optionally marked stale.
	cliReadAge = regexp.MustCompile(`^\d+[smhdy](\d+[smh])?( \(stale\))?$`)
	// cliReadVersion is a Kubernetes version.
	cliReadVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+\S*$`)
	// cliReadHeader is a table header: upper-case words.
	cliReadHeader = regexp.MustCompile(`^[A-Z][A-Z-]*$`)
	// cliReadCountColumns are the result-count columns masked when counts is set.
	cliReadCountColumns = []string{"PASS", "FAIL", "WARN", "ERROR", "SKIP", "BLOCKED"}
	// cliReadCells splits a table row into its cells: tabwriter pads with at least 3 spaces.
	cliReadCells = regexp.MustCompile(`\s{3,}`)
	// cliReadJSONTime and friends are the volatile fields of the JSON outputs.
	cliReadJSONTime    = regexp.MustCompile(`^(\s*"(?:generatedAt|lastSyncTime|reportTime|timestamp|time)": )"[^"]*"`)
	cliReadJSONAge     = regexp.MustCompile(`^(\s*"ageSeconds": )\d+`)
	cliReadJSONVersion = regexp.MustCompile(`^(\s*"version": )"v[^"]*"`)
	cliReadJSONCount   = regexp.MustCompile(`^(\s*"(?:pass|fail|warn|error|skip|violations|blocked)": )\d+`)
)

// cliReadNormaliseTable replaces ages and versions (and, with counts, the result-count columns)
// by placeholders, and aligns the table again.
func cliReadNormaliseTable(out string, counts bool) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 6, 4, 3, ' ', 0) // as the CLI's tables
	var header []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		cells := cliReadCells.Split(line, -1)
		if len(cells) > 1 && !slices.ContainsFunc(cells, func(c string) bool { return !cliReadHeader.MatchString(c) }) {
			header = cells
		} else {
			for i, c := range cells {
				switch {
				case cliReadAge.MatchString(c):
					cells[i] = "<age>" + strings.TrimLeft(c, "0123456789smhdy")
				case cliReadVersion.MatchString(c):
					cells[i] = "<version>"
				case counts && len(header) == len(cells) && slices.Contains(cliReadCountColumns, header[i]) && c != "-":
					cells[i] = "<n>"
				}
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	return buf.String()
}

// cliReadNormaliseJSON replaces times, ages and versions (and, with counts, result counts) by
// placeholders, keeping the output's order and layout.
func cliReadNormaliseJSON(out string, counts bool) string {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		line = cliReadJSONTime.ReplaceAllString(line, `$1"<time>"`)
		line = cliReadJSONAge.ReplaceAllString(line, `$1"<age>"`)
		line = cliReadJSONVersion.ReplaceAllString(line, `$1"<version>"`)
		if counts {
			line = cliReadJSONCount.ReplaceAllString(line, `$1"<n>"`)
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

// cliReadGolden compares got with testdata/cli/<name>.golden, or rewrites it with -update.
func cliReadGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name+".golden")
	if cliReadUpdating() {
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
		t.Fatalf("%v (run go test ./e2e -run TestCLIRead -update to write it)", err)
	}
	if got != string(want) {
		diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(want)), B: difflib.SplitLines(got), FromFile: path, ToFile: "got", Context: 3,
		})
		t.Errorf("output differs from %s (go test ./e2e -run TestCLIRead -update rewrites it):\n%s", path, diff)
	}
}
