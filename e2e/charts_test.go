package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/internal/charttest"
)

// The charts' RBAC is config/rbac's, rule for rule, the KubeVela PolicyDefinition is
// config/kubevela's and the admission policy config/admission's: the kustomize manifests and the
// charts never drift apart.
func TestChartManifestsMatchConfig(t *testing.T) {
	hub := mustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", charttest.Values(t, `{kubevela: {enabled: true}, ui: {enabled: true}}`))
	agent := mustRender(t, agentChartDir, "policyhub-agent", "policyhub-system", charttest.Values(t, `
clusterName: cluster-1
hubKubeconfigSecret: {name: hub-kubeconfig}
hubAccess: {enabled: true}`))

	configObject := func(file, kind string) *unstructured.Unstructured {
		objs, err := charttest.DecodeObjects(charttest.File(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
		t.Fatalf("no %s in %s", kind, file)
		return nil
	}
	configNamed := func(file, name string) *unstructured.Unstructured {
		objs, err := charttest.DecodeObjects(charttest.File(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, o := range objs {
			if o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s in %s", name, file)
		return nil
	}
	rendered := func(r *charttest.Rendered, kind, namespace, nameSuffix string) *unstructured.Unstructured {
		for _, o := range r.ByKind(kind) {
			if o.GetNamespace() == namespace && strings.HasSuffix(o.GetName(), nameSuffix) {
				return o
			}
		}
		t.Fatalf("%s renders no %s *%s in namespace %q", r.Chart.Name(), kind, nameSuffix, namespace)
		return nil
	}
	for _, c := range []struct {
		what     string
		chart    *unstructured.Unstructured
		config   *unstructured.Unstructured
		compared string
	}{
		{"the hub's ClusterRole", rendered(hub, "ClusterRole", "", "policyhub-hub"), configObject("../config/rbac/hub/cluster_role.yaml", "ClusterRole"), "rules"},
		{"the tenants' ClusterRole", rendered(hub, "ClusterRole", "", "-tenant"), configObject("../config/rbac/tenant/cluster_role.yaml", "ClusterRole"), "rules"},
		{"the exception approvers' ClusterRole", rendered(hub, "ClusterRole", "", "-exception-approver"), configObject("../config/rbac/exception-approver/cluster_role.yaml", "ClusterRole"), "rules"},
		{"the hub's gateway Secrets Role", rendered(hub, "Role", "vela-system", "-cluster-inventory"), configObject("../config/rbac/hub/gateway_secrets_role.yaml", "Role"), "rules"},
		{"the hub's leader election Role", rendered(hub, "Role", "policyhub-system", "-leader-election"), configObject("../config/rbac/hub/leader_election_role.yaml", "Role"), "rules"},
		{"the hub's Leases' FlowSchema", rendered(hub, "FlowSchema", "", "-leases"), configObject("../config/flowcontrol/hub_leases.yaml", "FlowSchema"), "spec"},
		{"the hub's metrics auth ClusterRole", rendered(hub, "ClusterRole", "", "-metrics-auth"), configObject("../config/rbac/hub/metrics_auth_role.yaml", "ClusterRole"), "rules"},
		{"the metrics reader ClusterRole", rendered(hub, "ClusterRole", "", "-metrics-reader"), configObject("../config/rbac/hub/metrics_reader_role.yaml", "ClusterRole"), "rules"},
		{"the web view's viewer ClusterRole", rendered(hub, "ClusterRole", "", "-ui-viewer"), configObject("../config/rbac/hub/ui_viewer_role.yaml", "ClusterRole"), "rules"},
		{"the agent's ClusterRole", rendered(agent, "ClusterRole", "", "policyhub-agent"), configObject("../config/rbac/agent/cluster_role.yaml", "ClusterRole"), "rules"},
		{"the agent's hub access Role", rendered(agent, "Role", "cluster-1", "policyhub-agent"), configObject("../config/rbac/agent-hub-access/agent_access.yaml", "Role"), "rules"},
		{"the KubeVela PolicyDefinition", hub.One(t, "PolicyDefinition"), configObject("../config/kubevela/kyverno-policy.yaml", "PolicyDefinition"), "spec"},
		{"the KubeVela WorkflowStepDefinition", hub.One(t, "WorkflowStepDefinition"), configObject("../config/kubevela/kyverno-policy-ready.yaml", "WorkflowStepDefinition"), "spec"},
		{"the finalizer admission policy", rendered(hub, "MutatingAdmissionPolicy", "", "-finalizer"), configObject("../config/admission/finalizer.yaml", "MutatingAdmissionPolicy"), "spec"},
		{"the exception requester stamp", rendered(hub, "MutatingAdmissionPolicy", "", "-exception-requester"), configNamed("../config/admission/exceptions-requester-stamp.yaml", "policyhub-exception-requester"), "spec"},
		{"the exception requester check", rendered(hub, "ValidatingAdmissionPolicy", "", "-exception-requester"), configNamed("../config/admission/exceptions.yaml", "policyhub-exception-requester"), "spec"},
		{"the exception approval admission policy", rendered(hub, "ValidatingAdmissionPolicy", "", "-exception-approval"), configNamed("../config/admission/exceptions.yaml", "policyhub-exception-approval"), "spec"},
		{"the exception lifetime admission policy", rendered(hub, "ValidatingAdmissionPolicy", "", "-exception-lifetime"), configNamed("../config/admission/exceptions.yaml", "policyhub-exception-lifetime"), "spec"},
	} {
		if got, want := c.chart.Object[c.compared], c.config.Object[c.compared]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the chart's %s differ from config's:\nchart:  %v\nconfig: %v", c.what, c.compared, got, want)
		}
	}
	pd := hub.One(t, "PolicyDefinition")
	want := configObject("../config/kubevela/kyverno-policy.yaml", "PolicyDefinition")
	if pd.GetName() != want.GetName() || pd.GetNamespace() != want.GetNamespace() || !reflect.DeepEqual(pd.GetAnnotations(), want.GetAnnotations()) {
		t.Errorf("the chart's PolicyDefinition is %s/%s %v, config's %s/%s %v",
			pd.GetNamespace(), pd.GetName(), pd.GetAnnotations(), want.GetNamespace(), want.GetName(), want.GetAnnotations())
	}
}

// Every object the hub chart renders, over a matrix of values, is accepted by the hub's real
// apiserver with server-side dry-run: its schemas, defaulting and admission, among which
// PodSecurity at the restricted level. Kinds the hub does not serve (the Prometheus Operator's)
// are checked offline.
func TestChartHubDryRunOnTheHub(t *testing.T) {
	ctx := testContext(t)
	hubAdmin := directClient(t, fleetOf(t).Hub.Config)
	binary := chartBuildCommand(t, t.TempDir(), "policyhub-hub")
	// The ClusterRoles: the hub's, the tenants' (aggregated into edit, bound by the hub admin), the
	// exception approvers' (bound by the hub admin), its metrics auth (bound) and the metrics reader
	// (bound when metrics.readerSubjects are given). The admission policies: the finalizer's, and the
	// exceptions' requester stamp (mutating), requester check, approval and lifetime (validating).
	base := map[string]int{"ServiceAccount": 1, "ClusterRole": 5, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2, "Deployment": 1, "Service": 1, "ConfigMap": 1,
		"MutatingAdmissionPolicy": 2, "MutatingAdmissionPolicyBinding": 2, "ValidatingAdmissionPolicy": 3, "ValidatingAdmissionPolicyBinding": 3,
		"NetworkPolicy": 1, "PodDisruptionBudget": 1, "FlowSchema": 1}
	with := func(extra map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			if out[k] += v; out[k] == 0 {
				delete(out, k)
			}
		}
		return out
	}
	gatewayNS := chartNamespace(ctx, t, hubAdmin, "charts-gateway")
	for _, c := range []struct {
		name   string
		values string
		kinds  map[string]int
		args   []string // in the container's args, besides the namespaced ones checked below
	}{
		{"defaults", `{}`, base, []string{"--hub-id=policyhub", "--gateway-secret-namespace=vela-system", "--resync-interval=10m", "--share-fleet", "--leader-elect=false",
			"--metrics-bind-address=:8443", "--metrics-secure=true", "--metrics-auth-audiences=policyhub"}},
		// Active-passive, as before replicas shared the fleet: one elected replica works it all.
		{"leader election", `{sharing: {enabled: false}}`, base, []string{"--leader-elect=true"}},
		{"servicemonitor and prometheusrule", `{metrics: {serviceMonitor: {enabled: true, labels: {release: prom}}}, prometheusRule: {enabled: true}}`,
			with(map[string]int{"ServiceMonitor": 1, "PrometheusRule": 1}), []string{"--hub-id=policyhub"}},
		{"servicemonitor with a token Secret", `{metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: prom-token}}}}`,
			with(map[string]int{"ServiceMonitor": 1}), []string{"--metrics-secure=true"}},
		// Any API token (Prometheus's own ServiceAccount token): the compatible setting.
		{"servicemonitor with API tokens", `{metrics: {audiences: [], serviceMonitor: {enabled: true}}}`,
			with(map[string]int{"ServiceMonitor": 1}), []string{"--metrics-secure=true", "--metrics-auth-audiences="}},
		// Plain HTTP: no reviews asked, so neither the metrics auth nor the reader ClusterRole.
		{"plain metrics", `{metrics: {secure: false, serviceMonitor: {enabled: true}}}`,
			with(map[string]int{"ServiceMonitor": 1, "ClusterRole": -2, "ClusterRoleBinding": -1}), []string{"--metrics-secure=false"}},
		{"kubevela", `kubevela: {enabled: true}`, with(map[string]int{"PolicyDefinition": 1, "WorkflowStepDefinition": 1}), []string{"--hub-id=policyhub"}},
		// The web view with plain metrics: the hub still reviews tokens (the view's), the metrics
		// reader goes, the viewer ClusterRole, its binding and the view's Service come.
		{"web view", `
ui: {enabled: true, certSecret: ui-cert, viewerSubjects: [{kind: Group, name: platform}], from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: auth-proxy}}}]}
metrics: {secure: false}`,
			with(map[string]int{"ClusterRoleBinding": 1, "Service": 1}), []string{"--ui-bind-address=:9443", "--ui-auth-audiences=policyhub", "--ui-cert-dir=/etc/policyhub/ui-cert", "--metrics-secure=false"}},
		{"everything set", fmt.Sprintf(`
hubId: fleet-a
image: {repository: registry.example:5000/policyhub/hub, digest: "sha256:%s"}
replicaCount: 2
resyncInterval: 5m
retryMaxDelay: 30s
maxConcurrentPasses: 4
maxObjectsPerTenantPerCluster: 40
maxOwnedObjectsPerCluster: 20000
kubeAPI: {qps: 50.5, burst: 100}
gateway: {secretNamespace: %s, url: "https://cluster-gateway.vela-system.svc:9443", caSecret: gateway-ca}
log: {level: debug, encoder: console}
extraArgs: ["--max-concurrent-reconciles=8"]
serviceAccount: {create: false, name: existing-hub-sa}
podAnnotations: {example.com/team: platform}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
metrics: {port: 9090, certSecret: metrics-cert, readerSubjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}, {kind: Group, name: scrapers}], serviceMonitor: {enabled: true, interval: 1m}}
healthProbe: {port: 9091}
prometheusRule: {enabled: true, alerts: {newFailResults: {enabled: false}, summaryStale: {thresholdSeconds: 600}}}
networkPolicy:
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32, "fd00::1/128"], extraRules: [{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: vela-system}}}], ports: [{port: 9443}]}]}
podDisruptionBudget: {minAvailable: 1}
grafanaDashboard: {enabled: false}
admissionPolicy: {enabled: false}
exceptions: {maxLifetime: 720h, admissionPolicy: false, approvableServiceAccounts: [flux-system/kustomize-controller, argocd/argocd-application-controller]}
kubevela: {enabled: true}
`, strings.Repeat("ab", 32), gatewayNS),
			with(map[string]int{"ServiceAccount": -1, "ConfigMap": -1, "ServiceMonitor": 1, "PrometheusRule": 1, "PolicyDefinition": 1, "WorkflowStepDefinition": 1, "ClusterRoleBinding": 1,
				"MutatingAdmissionPolicy": -2, "MutatingAdmissionPolicyBinding": -2, "ValidatingAdmissionPolicy": -3, "ValidatingAdmissionPolicyBinding": -3}),
			[]string{"--hub-id=fleet-a", "--gateway-secret-namespace=" + gatewayNS, "--gateway-url=https://cluster-gateway.vela-system.svc:9443",
				"--gateway-ca-file=/etc/policyhub/gateway-ca/ca.crt", "--resync-interval=5m", "--retry-max-delay=30s", "--max-concurrent-passes=4",
				"--max-objects-per-tenant-per-cluster=40", "--max-owned-objects-per-cluster=20000", "--kube-api-qps=50.5", "--kube-api-burst=100", "--metrics-bind-address=:9090", "--metrics-cert-dir=/etc/policyhub/metrics-cert", "--health-probe-bind-address=:9091",
				"--zap-log-level=debug", "--zap-encoder=console", "--max-concurrent-reconciles=8", "--max-exception-lifetime=720h",
				"--approvable-service-accounts=flux-system/kustomize-controller,argocd/argocd-application-controller"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := chartNamespace(ctx, t, hubAdmin, "charts-hub")
			vals := charttest.Values(t, c.values)
			r := mustRender(t, hubChartDir, "policyhub-hub", ns, vals)
			if got := r.Kinds(); !reflect.DeepEqual(got, c.kinds) {
				t.Errorf("rendered kinds %v, want %v", got, c.kinds)
			}
			unserved := chartDryRunAll(ctx, t, fleetOf(t).Hub.Config, r.Objects, "ServiceMonitor", "PrometheusRule")
			if want := c.kinds["ServiceMonitor"] + c.kinds["PrometheusRule"]; len(unserved) != want {
				t.Errorf("%d objects the hub does not serve, want %d (the ServiceMonitor and PrometheusRule)", len(unserved), want)
			}

			dep := charttest.Deployment(t, r)
			args := dep.Spec.Template.Spec.Containers[0].Args
			for _, a := range append(c.args, "--leader-election-namespace="+ns) {
				if !slices.Contains(args, a) {
					t.Errorf("the hub's args %q lack %q", args, a)
				}
			}
			chartRunFlags(t, binary, args)
			metricsPort, probePort := int32(8443), int32(8081)
			if c.name == "everything set" {
				metricsPort, probePort = 9090, 9091
				if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.Containers[0].Image != "registry.example:5000/policyhub/hub@sha256:"+strings.Repeat("ab", 32) {
					t.Errorf("replicas %d, image %s", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Image)
				}
				if vols := dep.Spec.Template.Spec.Volumes; len(vols) != 2 || vols[0].Secret == nil || vols[0].Secret.SecretName != "gateway-ca" ||
					vols[1].Secret == nil || vols[1].Secret.SecretName != "metrics-cert" {
					t.Errorf("the gateway CA and metrics certificate Secrets are not mounted: %+v", vols)
				}
				var subjects string
				for _, b := range r.ByKind("ClusterRoleBinding") {
					if strings.HasSuffix(b.GetName(), "-metrics-reader") {
						subjects = fmt.Sprint(b.Object["subjects"])
					}
				}
				if !strings.Contains(subjects, "namespace:monitoring") ||
					!strings.Contains(subjects, "apiGroup:rbac.authorization.k8s.io kind:Group name:scrapers") {
					t.Errorf("the metrics reader binding's subjects %s are not metrics.readerSubjects", subjects)
				}
			}
			ports := map[string]int32{"metrics": metricsPort, "probes": probePort}
			if c.name == "web view" {
				ports["ui"] = 9443
				charttest.CheckWebView(t, r, dep)
			}
			charttest.CheckPodSpec(t, dep.Spec.Template.Spec, ports)
			charttest.CheckHubWiring(t, r, dep, ns)
			charttest.CheckNetworkPolicy(t, r, dep)
			charttest.CheckDisruptionBudget(t, r, dep)
			if c.kinds["ConfigMap"] == 1 {
				cm := r.One(t, "ConfigMap")
				if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != ns {
					t.Errorf("dashboard ConfigMap %s/%s labels %v: want grafana_dashboard=1 in the release namespace", cm.GetNamespace(), cm.GetName(), cm.GetLabels())
				}
				data, _, _ := unstructured.NestedString(cm.Object, "data", "policyhub.json")
				if !json.Valid([]byte(data)) || strings.TrimSpace(data) != strings.TrimSpace(string(charttest.File(t, filepath.Join(hubChartDir, "dashboards", "policyhub.json")))) {
					t.Errorf("the dashboard ConfigMap does not hold dashboards/policyhub.json as valid JSON")
				}
			}
			if c.kinds["ServiceMonitor"] == 1 {
				charttest.CheckServiceMonitor(t, r, dep, metricsPort)
			}
			if c.kinds["PrometheusRule"] == 1 {
				rules := charttest.DecodeAlertRules(t, r.One(t, "PrometheusRule"))
				var names []string
				for _, rule := range rules {
					names = append(names, rule.Alert)
					if rule.Expr == "" || rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
						t.Errorf("alert %s lacks an expr, a severity or annotations: %+v", rule.Alert, rule)
					}
				}
				want := []string{"PolicyhubClusterUnreachable", "PolicyhubSyncFailing", "PolicyhubSummaryStale", "PolicyhubNewFailResults", "PolicyhubRolloutHeld", "PolicyhubExceptionExpiresSoon", "PolicyhubClusterUnowned", "PolicyhubPolicyNotEnforced", "PolicyhubKyvernoExceptionBypass", "PolicyhubMetricsDown"}
				if c.name == "everything set" {
					want = slices.Delete(want, 3, 4)
				}
				if !slices.Equal(names, want) {
					t.Errorf("alerts %v, want %v", names, want)
				}
			}
			if c.kinds["PolicyDefinition"] == 1 {
				if pd := r.One(t, "PolicyDefinition"); pd.GetNamespace() != "vela-system" {
					t.Errorf("the PolicyDefinition is in %q, want vela-system (KubeVela's definitions namespace)", pd.GetNamespace())
				}
			}
		})
	}

	// The PodSecurity check above is live: the same Deployment without the restricted security
	// context draws the apiserver's warnings.
	t.Run("a non-restricted pod is flagged", func(t *testing.T) {
		ns := chartNamespace(ctx, t, hubAdmin, "charts-hub-unrestricted")
		r := mustRender(t, hubChartDir, "policyhub-hub", ns, charttest.Values(t, `{podSecurityContext: {}, securityContext: {allowPrivilegeEscalation: true}}`))
		c, warnings := chartWarningClient(t, fleetOf(t).Hub.Config)
		if err := chartDryRunApply(ctx, c, r.One(t, "Deployment")); err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(warnings.take(), "\n"); !strings.Contains(w, `violate PodSecurity "restricted`) || !strings.Contains(w, "allowPrivilegeEscalation") {
			t.Errorf("no PodSecurity warning for a privileged hub pod; warnings: %q", w)
		}
	})
}

// The agent chart, in a managed cluster and (hub access) on the hub, over a matrix of values: every
// object is accepted by the real apiservers with server-side dry-run.
func TestChartAgentDryRun(t *testing.T) {
	ctx := testContext(t)
	hubAdmin := directClient(t, fleetOf(t).Hub.Config)
	binary := chartBuildCommand(t, t.TempDir(), "policyhub-agent")
	managed := map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "NetworkPolicy": 1, "PodDisruptionBudget": 1}
	hubSide := map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1}
	for _, c := range []struct {
		name    string
		values  string
		kinds   map[string]int
		cluster *rest.Config
		args    []string
	}{
		{"managed cluster, defaults", `{clusterName: cluster-1, hubKubeconfigSecret: {name: policyhub-hub-kubeconfig}}`, managed, fleetOf(t).Cluster("cluster-1").Config,
			[]string{"--cluster-name=cluster-1", "--hub-kubeconfig=/etc/policyhub/hub/kubeconfig", "--push-interval=10s", "--heartbeat-interval=1m",
				"--application-label=app.oam.dev/name", "--kyverno-namespace=kyverno", "--max-violations=50", "--health-probe-bind-address=:8081"}},
		{"managed cluster, on the hub too", `{clusterName: cluster-1, hubKubeconfigSecret: {name: policyhub-hub-kubeconfig}}`, managed, fleetOf(t).Hub.Config, nil},
		{"managed cluster, everything set", `
clusterName: cluster-2
hubKubeconfigSecret: {name: hub-credentials, key: config}
pushInterval: 30s
heartbeatInterval: 2m
discoveryInterval: 1m
applicationLabel: app.kubernetes.io/instance
kyvernoNamespace: kyverno-system
maxViolations: 200
log: {level: debug}
extraArgs: [--zap-time-encoding=rfc3339]
serviceAccount: {name: agent-sa}
fullnameOverride: phagent
networkPolicy: {egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32, 203.0.113.7/32], dns: false}}
`, managed, fleetOf(t).Cluster("cluster-2").Config,
			[]string{"--cluster-name=cluster-2", "--push-interval=30s", "--heartbeat-interval=2m", "--discovery-interval=1m",
				"--application-label=app.kubernetes.io/instance", "--kyverno-namespace=kyverno-system", "--max-violations=200", "--zap-log-level=debug", "--zap-time-encoding=rfc3339"}},
		{"hub side", `{clusterName: HUBNS, agent: {enabled: false}, hubAccess: {enabled: true}}`, hubSide, fleetOf(t).Hub.Config, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := chartNamespace(ctx, t, directClient(t, c.cluster), "charts-agent")
			// The hub side's namespace is the cluster's: a fresh one (it must exist for a dry-run).
			vals := strings.ReplaceAll(c.values, "HUBNS", chartNamespace(ctx, t, hubAdmin, "charts-cluster"))
			r := mustRender(t, agentChartDir, "policyhub-agent", ns, charttest.Values(t, vals))
			if got := r.Kinds(); !reflect.DeepEqual(got, c.kinds) {
				t.Errorf("rendered kinds %v, want %v", got, c.kinds)
			}
			if unserved := chartDryRunAll(ctx, t, c.cluster, r.Objects); len(unserved) > 0 {
				t.Errorf("kinds not served: %v", unserved)
			}
			if c.kinds["Deployment"] == 0 {
				return
			}
			dep := charttest.Deployment(t, r)
			pod := dep.Spec.Template.Spec
			args := pod.Containers[0].Args
			for _, a := range c.args {
				if !slices.Contains(args, a) {
					t.Errorf("the agent's args %q lack %q", args, a)
				}
			}
			chartRunFlags(t, binary, args)
			charttest.CheckPodSpec(t, pod, map[string]int32{"probes": 8081})
			charttest.CheckNetworkPolicy(t, r, dep)
			charttest.CheckDisruptionBudget(t, r, dep)
			if *dep.Spec.Replicas != 1 {
				t.Errorf("%d agent replicas, want 1", *dep.Spec.Replicas)
			}
			secret, key := "policyhub-hub-kubeconfig", "kubeconfig"
			if c.name == "managed cluster, everything set" {
				secret, key = "hub-credentials", "config"
				if pod.ServiceAccountName != "agent-sa" || dep.GetName() != "phagent" {
					t.Errorf("service account %s, deployment %s", pod.ServiceAccountName, dep.GetName())
				}
			}
			if v := pod.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != secret || len(v[0].Secret.Items) != 1 ||
				v[0].Secret.Items[0].Key != key || v[0].Secret.Items[0].Path != "kubeconfig" {
				t.Errorf("the hub kubeconfig volume is %+v, want Secret %s key %s as kubeconfig", v, secret, key)
			}
			if m := pod.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != "/etc/policyhub/hub" || !m[0].ReadOnly {
				t.Errorf("the hub kubeconfig mount is %+v", m)
			}
			crb := r.One(t, "ClusterRoleBinding")
			subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
			if s := fmt.Sprint(subjects); !strings.Contains(s, "name:"+pod.ServiceAccountName) || !strings.Contains(s, "namespace:"+ns) {
				t.Errorf("the ClusterRoleBinding's subjects %s are not the pod's ServiceAccount %s/%s", s, ns, pod.ServiceAccountName)
			}
		})
	}
}

// chartDryRunAll dry-runs every object on a cluster: each must be accepted without a warning
// (PodSecurity's at the restricted level among them). Objects of the unserved kinds may be of a
// kind the cluster does not serve; they are returned.
func chartDryRunAll(ctx context.Context, t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured, unservedKinds ...string) []*unstructured.Unstructured {
	t.Helper()
	c, warnings := chartWarningClient(t, cfg)
	var unserved []*unstructured.Unstructured
	for _, obj := range objs {
		what := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		err := chartDryRunApply(ctx, c, obj)
		if w := warnings.take(); len(w) > 0 {
			t.Errorf("%s draws warnings: %q", what, w)
		}
		switch {
		case meta.IsNoMatchError(err) && slices.Contains(unservedKinds, obj.GetKind()) && obj.GroupVersionKind().Group == "monitoring.coreos.com":
			unserved = append(unserved, obj)
		case err != nil:
			t.Errorf("%s is refused by %s: %v", what, cfg.Host, err)
		}
	}
	return unserved
}

// chartInstall really creates the rendered objects of the kinds given (server-side apply as helm's
// field manager) and deletes them when the test ends.
func chartInstall(ctx context.Context, t *testing.T, c client.Client, r *charttest.Rendered, kinds ...string) {
	t.Helper()
	for _, obj := range r.Objects {
		if !slices.Contains(kinds, obj.GetKind()) {
			continue
		}
		obj := obj.DeepCopy()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("install %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		t.Cleanup(func() {
			// A deleted namespace stays Terminating (no namespace controller runs): its name is never reused.
			if err := c.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("uninstall %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		})
	}
}

// chartTestName is a name no test used before in this fleet.
func chartTestName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// chartNamespace creates a fresh namespace that enforces (and warns about) the restricted Pod
// Security Standard, as a production namespace for policyhub should, and deletes it at the end.
func chartNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartTestName(prefix), Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}
