package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/internal/charttest"
)

// prometheusBinary is Debian's prometheus package (hack/testbin.sh installs it).
const prometheusBinary = "/usr/bin/prometheus"

// A real Prometheus scrapes the hub's /metrics while an Audit FleetPolicy finds a violation in
// cluster-1 and a second FleetPolicy keeps conflicting with a foreign ClusterPolicy in cluster-2.
// Prometheus's HTTP API has the violation series of each cluster, and every PromQL expression the
// hub chart ships — each dashboard query and each alert of the PrometheusRule, which Prometheus
// also loads as its rules file after `promtool check rules` — parses and returns data.
//
// The alerts:
//   - PolicyhubNewFailResults is triggered for real: the policy's fail results are 0 in
//     cluster-1 at one of the alert's one-minute subquery steps and 1 at a later one (the violating
//     Deployment is created only after Prometheus has recorded the 0 at a step), so the full
//     expression returns data and Prometheus fires the alert (it has no `for`).
//   - PolicyhubSyncFailing is triggered for real: the conflicting FleetPolicy's resyncs keep
//     increasing policyhub_sync_errors_total{reason="conflict"}, so the full expression returns
//     data and the alert is pending (its `for` is 15m).
//   - PolicyhubClusterUnreachable is triggered for real by a cluster whose gateway credentials
//     point at a port nothing listens on, with a FleetPolicy placed there (pending: `for` 5m).
//   - PolicyhubSummaryStale is triggered for real by a summary the hub saw ten minutes ago
//     and that was never refreshed (pending, then firing after its `for` of 1m). The age is the
//     hub's: its status says the hub saw it then, as after a hub restart.
//   - PolicyhubMetricsDown is triggered for real by a scrape that fails: Prometheus also scrapes,
//     under the job and namespace the Prometheus Operator gives the chart's ServiceMonitor, an
//     address nothing listens on (pending: `for` 5m). The healthy hub is scraped under another job.
func TestPrometheusDashboardAndAlerts(t *testing.T) {
	inParallel(t)
	if _, err := os.Stat(prometheusBinary); err != nil {
		t.Fatalf("%s: %v (hack/testbin.sh installs Debian's prometheus)", prometheusBinary, err)
	}
	start := time.Now()
	ctx := testContext(t)
	// Resyncs keep the conflict's sync errors growing. The hub runs as a replica sharing the
	// fleet (alone, it works every cluster), so that the replicas' series are there too.
	hub := startHub(t, 2*time.Second, func(o *controllers.HubOptions) {
		o.Replica = &shard.Replica{HubID: e2eHubID, Namespace: e2eHubNamespace, Name: "prometheus-e2e", Identity: e2eHubID + "/prometheus-e2e"}
	})
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")

	// Prometheus first, so that it sees the results before and after the violation.
	rulesFile := prometheusRulesFile(t)
	prom := startPrometheus(t, hub.metricsURL, rulesFile)
	t.Logf("prometheus ready after %s", time.Since(start).Round(time.Millisecond))

	// An unreachable cluster with a FleetPolicy placed there (prune off: its deletion must not
	// wait for a cluster that never answers), and a cluster whose agent went silent 10 minutes ago.
	const ghost, silent = "prometheus-ghost", "prometheus-silent"
	admin := directClient(t, fleetOf(t).Hub.Config)
	ghostSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ghost, Namespace: fleetOf(t).SecretNamespace, Labels: map[string]string{
			gateway.CredentialTypeLabel: gateway.CredentialTypeServiceAccountToken}},
		StringData: map[string]string{"endpoint": "https://127.0.0.1:1", "ca.crt": string(fleetOf(t).Hub.CAData), "token": "none"},
	}
	if err := admin.Create(ctx, ghostSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ghostSecret) })
	createFleetPolicy(t, `
metadata: {name: prometheus-e2e-ghost}
spec:
  prune: false
  placement: {clusters: [`+ghost+`]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("prometheus-ghost"))
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: silent}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	old := summaryFor(silent, silent)
	old.Spec.GeneratedAt = &metav1.Time{Time: time.Now().Add(-10 * time.Minute)}
	if err := applySummary(ctx, admin, old, "prometheus-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSummary(t, silent) })
	markSeenAt(ctx, t, silent, time.Now().Add(-10*time.Minute))

	const ns, name, conflictName = "prometheus-e2e", "prometheus-e2e-team", "prometheus-e2e-conflict"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, c2, ns)

	// A foreign ClusterPolicy of the same name in cluster-2: the second FleetPolicy conflicts there.
	foreign, _ := renderFleetPolicy(t, conflictName, auditTemplate("prometheus-conflict"), nil)
	foreign.SetLabels(nil)
	foreign.SetAnnotations(nil)
	if err := c2.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Delete(context.Background(), foreign) })
	createFleetPolicy(t, `
metadata: {name: `+conflictName+`}
spec:
  placement: {clusters: [cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("prometheus-conflict"))

	// A rollout held for an approval nobody gives: its wave waits, with gate measurements.
	createFleetPolicy(t, rolloutPolicy("prometheus-e2e-rollout", ns, `
    - name: prod
      clusters: [cluster-2]
      gate: {approval: true}`, "tier"))

	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1", "cluster-2"))
	waitFleetPolicy(t, name, "synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	// An approved exception from it that ends within the alert's week.
	grace := requestException(t, admin, fmt.Sprintf(`
metadata: {name: prometheus-e2e-grace, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [legacy]}
  clusters: {names: [cluster-1]}
  owner: shop
  reason: the legacy Deployment goes with the next release
  ticket: SHOP-1
  expiresAt: %s`, e2eHubNamespace, name, ns, expiresIn(48*time.Hour)))
	if err := decide(ctx, t, approverClient(t, "security@corp"), grace, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve the exception: %v", err)
	}
	// A compliant Deployment in each cluster: the policy has results in both, fail 0.
	for _, c := range []client.Client{c1, c2} {
		if err := c.Create(ctx, shopDeployment(ns, "ok", "checkout")); err != nil {
			t.Fatal(err)
		}
	}
	failSum := fmt.Sprintf(`sum by (cluster, policy) (policyhub_policy_results{result="fail", cluster="cluster-1", policy=%q})`, name)
	eventually(t, 3*time.Minute, 500*time.Millisecond, "Prometheus records fail 0 for the policy in cluster-1 at a one-minute step", func() error {
		// The alert's subquery evaluates at multiples of one minute: one of them must see the 0.
		return prom.wantData(ctx, fmt.Sprintf(`count_over_time((%s == 0)[15m:1m])`, failSum))
	})
	t.Logf("fail 0 recorded at a minute step after %s", time.Since(start).Round(time.Millisecond))

	// The violation.
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatalf("Audit mode must let the Deployment in: %v", err)
	}
	eventually(t, 3*time.Minute, 500*time.Millisecond, "violation series on the hub's /metrics", func() error {
		if v, ok := hub.scrape(t, "policyhub_policy_results", map[string]string{"cluster": "cluster-1", "policy": name, "result": "fail"}); !ok || v < 1 {
			return fmt.Errorf("cluster-1 fail series %v (present %v)", v, ok)
		}
		return nil
	})
	t.Logf("violation on the hub's /metrics after %s", time.Since(start).Round(time.Millisecond))

	// The violation series of each cluster, through Prometheus's HTTP API.
	eventually(t, 30*time.Second, 500*time.Millisecond, "violation series of each cluster in Prometheus", func() error {
		for _, q := range []string{
			`policyhub_cluster_results{cluster="cluster-1"}`,
			`policyhub_cluster_results{cluster="cluster-2"}`,
			`policyhub_cluster_results{cluster="cluster-1", result="fail"} >= 1`,
			// cluster-2's own total counts the other tests' results too (they run side by side):
			// its fail 0 is the policy's there.
			`policyhub_cluster_results{cluster="cluster-2", result="fail"}`,
			fmt.Sprintf(`policyhub_policy_results{cluster="cluster-2", policy=%q, result="fail"} == 0`, name),
			fmt.Sprintf(`policyhub_policy_results{cluster="cluster-1", policy=%q, result="fail"} >= 1`, name),
			`policyhub_application_results{cluster="cluster-1", application="shop", result="fail"} >= 1`,
		} {
			if err := prom.wantData(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("violation series in Prometheus after %s", time.Since(start).Round(time.Millisecond))

	// Alerts triggered for real: Prometheus evaluates the chart's rules itself.
	eventually(t, 3*time.Minute, time.Second, "every alert firing or pending", func() error {
		for _, q := range []string{
			fmt.Sprintf(`ALERTS{alertname="PolicyhubNewFailResults", alertstate="firing", cluster="cluster-1", policy=%q}`, name),
			`ALERTS{alertname="PolicyhubSyncFailing", alertstate="pending", cluster="cluster-2", reason="conflict"}`,
			// Pending, or firing once its `for` (1m) has passed.
			`ALERTS{alertname="PolicyhubClusterUnreachable", cluster="` + ghost + `"}`,
			`ALERTS{alertname="PolicyhubSummaryStale", cluster="` + silent + `"}`,
			`ALERTS{alertname="PolicyhubRolloutHeld", alertstate="firing", policy="prometheus-e2e-rollout", wave="prod"}`,
			`ALERTS{alertname="PolicyhubExceptionExpiresSoon", alertstate="firing", namespace="policyhub-system", name="prometheus-e2e-grace"}`,
			`ALERTS{alertname="PolicyhubMetricsDown", alertstate="pending", job="policyhub-hub-metrics", namespace="policyhub-system"}`,
		} {
			if err := prom.wantData(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("alerts fired after %s", time.Since(start).Round(time.Millisecond))

	// Every expression of the dashboard and the alert rules. The rate interval covers 15 scrapes.
	queries := charttest.PromQL(t, hubChartDir, "15s", charttest.PrometheusTestRules, hubCapabilities(t))
	eventually(t, 30*time.Second, time.Second, "every dashboard and alert expression returns data", func() error {
		var failed []string
		for _, q := range queries {
			if q.Source == "alert: PolicyhubClusterUnowned" {
				continue // fires only when replicas fail each other: TestPrometheusClusterUnownedRule
			}
			if q.Source == "alert: PolicyhubKyvernoUpgradeBlocked" {
				continue // fires only while a cluster holds legacy objects: TestPrometheusKyvernoUpgradeBlockedRule
			}
			if q.Source == "alert: PolicyhubPolicyNotEnforced" {
				continue // fires only while a cluster's Kyverno does not enforce a declaration: TestPrometheusPolicyNotEnforcedRule
			}
			if q.Source == "alert: PolicyhubKyvernoExceptionBypass" {
				continue // fires only for a cluster on Kyverno 1.19.0: TestPrometheusKyvernoExceptionBypassRule
			}
			expr := q.Expr
			if err := prom.wantData(ctx, expr); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", q.Source, err))
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("%d of %d expressions:\n%s", len(failed), len(queries), joinLines(failed))
		}
		return nil
	})
	t.Logf("%d expressions return data; %s in all", len(queries), time.Since(start).Round(time.Millisecond))
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}

// prometheusRulesFile renders the hub chart's PrometheusRule (default alert values) into a
// Prometheus rules file — its spec.groups — and checks it with promtool.
func prometheusRulesFile(t *testing.T) string {
	t.Helper()
	r := mustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", charttest.Values(t, charttest.PrometheusTestRules))
	rule := r.One(t, "PrometheusRule")
	groups, ok := rule.Object["spec"].(map[string]any)["groups"]
	if !ok {
		t.Fatal("the PrometheusRule has no spec.groups")
	}
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policyhub-rules.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(prometheusBinary), "promtool"), "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, data)
	}
	return path
}

// testPrometheus is a Prometheus server run by a test.
type testPrometheus struct {
	url string
}

// startPrometheus runs Prometheus scraping the hub's metrics URL every second and evaluating the
// rules file every second, until the test ends, and waits until it is ready. It also scrapes, as
// the job policyhub-hub-metrics in namespace policyhub-system (what the Prometheus Operator
// makes of the chart's ServiceMonitor for release policyhub-hub there), an address nothing
// listens on: a hub whose scrape fails. It runs in its own
// process group, forked from a thread locked for its lifetime with a parent-death signal: it dies
// with the test binary.
func startPrometheus(t *testing.T, metricsURL, rulesFile string) *testPrometheus {
	t.Helper()
	target, err := url.Parse(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
- job_name: policyhub-hub
  metrics_path: /metrics
  static_configs:
  - targets: [%q]
- job_name: policyhub-hub-metrics
  metrics_path: /metrics
  static_configs:
  - targets: [%q]
    labels: {namespace: policyhub-system}
`, rulesFile, target.Host, freeAddress(t))
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddress(t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prometheusBinary,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	// Linux sends the parent-death signal when the forking thread ends: fork from a goroutine
	// locked to its thread that lives until the cleanup.
	started, stop := make(chan error, 1), make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
		<-stop
	}()
	if err := <-started; err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		close(stop)
		logFile.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", log)
			}
		}
	})
	p := &testPrometheus{url: "http://" + addr}
	eventually(t, 30*time.Second, 100*time.Millisecond, "prometheus ready", func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("prometheus exited: %v", err)
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// freeAddress is a free 127.0.0.1 port.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// query runs an instant query through /api/v1/query and returns its result; an expression that
// does not parse is an error.
func (p *testPrometheus) query(ctx context.Context, expr string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", resp.Status, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("status %q: %s: %s", r.Status, r.ErrorType, r.Error)
	}
	if r.Data.ResultType == "scalar" || r.Data.ResultType == "string" {
		return r.Data.Result, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return nil, fmt.Errorf("result %s: %v", r.Data.Result, err)
	}
	if len(series) == 0 {
		return nil, nil
	}
	return r.Data.Result, nil
}

// wantData runs the query and wants a non-empty result.
func (p *testPrometheus) wantData(ctx context.Context, expr string) error {
	res, err := p.query(ctx, expr)
	if err != nil {
		return fmt.Errorf("%q: %v", expr, err)
	}
	if res == nil {
		return fmt.Errorf("%q: no data", expr)
	}
	return nil
}

// PolicyhubMetricsDown, as the chart renders it, evaluated by promtool on synthetic series: it
// fires after its 5 minutes when the ServiceMonitor's scrape fails (up 0) or when Prometheus has
// no such target at all, and not while the scrape succeeds or for another job's failure; it says
// that every other alert is blind meanwhile.
func TestPrometheusMetricsDownRule(t *testing.T) {
	rule := promtoolRule(t, "PolicyhubMetricsDown")
	if !strings.Contains(rule.Annotations["summary"], "every policyhub alert is blind") || !strings.Contains(rule.Annotations["description"], "every other policyhub alert is") {
		t.Errorf("PolicyhubMetricsDown does not say that the other alerts are blind: %v", rule.Annotations)
	}
	const hub = `up{job="policyhub-hub-metrics", namespace="policyhub-system", instance="10.0.0.1:8443"}`
	const other = `up{job="policyhub-hub-other", namespace="policyhub-system"}`
	down := func(extra map[string]string) []promAlert {
		labels := map[string]string{"severity": "critical", "job": "policyhub-hub-metrics", "namespace": "policyhub-system"}
		for k, v := range extra {
			labels[k] = v
		}
		return []promAlert{{Labels: labels, Annotations: rule.Annotations}}
	}
	name := "PolicyhubMetricsDown"
	file := map[string]any{
		"rule_files":          []string{prometheusRulesFile(t)},
		"evaluation_interval": "1m",
		"tests": []promRuleTest{
			{Interval: "1m", Input: []promSeries{{hub, "0x10"}, {other, "1x10"}}, Checks: []promCheck{
				{"4m", name, []promAlert{}},
				{"6m", name, down(map[string]string{"instance": "10.0.0.1:8443"})},
			}},
			{Interval: "1m", Input: []promSeries{{other, "0x10"}}, Checks: []promCheck{{"6m", name, down(nil)}}},
			{Interval: "1m", Input: []promSeries{{hub, "1x10"}}, Checks: []promCheck{{"6m", name, []promAlert{}}}},
		},
	}
	promtoolTestRules(t, file)
}

// PolicyhubClusterUnowned, as the chart renders it, evaluated by promtool on the replicas'
// series: quiet while the shares add up to the fleet (through a handover, shorter than its 2
// minutes), firing when a replica's clusters are worked by nobody (a replica that holds its Lease
// but exports nothing: its clusters are assigned to it, and no other replica takes them).
func TestPrometheusClusterUnownedRule(t *testing.T) {
	rule := promtoolRule(t, "PolicyhubClusterUnowned")
	if rule.Alert == "" {
		t.Fatal("the chart renders no PolicyhubClusterUnowned alert")
	}
	replica := func(metric, pod string) string {
		return fmt.Sprintf(`%s{job="policyhub-hub-metrics", namespace="policyhub-system", pod=%q}`, metric, pod)
	}
	const name = "PolicyhubClusterUnowned"
	fires := []promAlert{{Labels: map[string]string{"severity": "critical"}, Annotations: map[string]string{
		"summary": "policyhub has 3 clusters no hub replica works", "description": rule.Annotations["description"]}}}
	file := map[string]any{
		"rule_files":          []string{prometheusRulesFile(t)},
		"evaluation_interval": "1m",
		"tests": []promRuleTest{
			// Three replicas share 11 clusters (4+4+3); one dies at minute 3 and the others take
			// its clusters within a minute: never 2 minutes short, no alert.
			{Interval: "1m", Input: []promSeries{
				{replica("policyhub_replica_fleet_clusters", "hub-a"), "11x10"},
				{replica("policyhub_replica_fleet_clusters", "hub-b"), "11x10"},
				{replica("policyhub_replica_fleet_clusters", "hub-c"), "11x3"},
				{replica("policyhub_replica_clusters", "hub-a"), "4 4 4 4 6x6"},
				{replica("policyhub_replica_clusters", "hub-b"), "4 4 4 4 5x6"},
				{replica("policyhub_replica_clusters", "hub-c"), "3x3"},
			}, Checks: []promCheck{{"3m", name, []promAlert{}}, {"6m", name, []promAlert{}}, {"9m", name, []promAlert{}}}},
			// hub-c holds its Lease but works nothing: its 3 clusters are nobody's.
			{Interval: "1m", Input: []promSeries{
				{replica("policyhub_replica_fleet_clusters", "hub-a"), "11x10"},
				{replica("policyhub_replica_fleet_clusters", "hub-b"), "11x10"},
				{replica("policyhub_replica_clusters", "hub-a"), "4x10"},
				{replica("policyhub_replica_clusters", "hub-b"), "4x10"},
			}, Checks: []promCheck{{"1m", name, []promAlert{}}, {"5m", name, fires}}},
		},
	}
	promtoolTestRules(t, file)
}

// The shapes of promtool's rule unit tests (`promtool test rules`).
type promSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type promAlert struct {
	Labels      map[string]string `json:"exp_labels"`
	Annotations map[string]string `json:"exp_annotations"`
}

type promCheck struct {
	EvalTime  string      `json:"eval_time"`
	AlertName string      `json:"alertname"`
	Alerts    []promAlert `json:"exp_alerts"`
}

type promRuleTest struct {
	Interval string       `json:"interval"`
	Input    []promSeries `json:"input_series"`
	Checks   []promCheck  `json:"alert_rule_test"`
}

// promtoolTestRules writes a promtool rule test file and runs it; it fails the test with
// promtool's words.
func promtoolTestRules(t *testing.T, file map[string]any) {
	t.Helper()
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules-test.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(prometheusBinary), "promtool"), "test", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, data)
	}
}

// promtoolRule is the chart's alert rule name, as rendered for promtool's rule tests (whose
// binary it checks is there).
func promtoolRule(t *testing.T, name string) charttest.AlertRule {
	t.Helper()
	if _, err := os.Stat(prometheusBinary); err != nil {
		t.Fatalf("%s: %v (hack/testbin.sh installs Debian's prometheus)", prometheusBinary, err)
	}
	for _, r := range alertRules(t, charttest.PrometheusTestRules) {
		if r.Alert == name {
			return r
		}
	}
	t.Fatalf("the chart renders no alert %s", name)
	return charttest.AlertRule{}
}
