package charttest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// CheckPodSpec checks a chart's pod: the restricted security context, resources, the named
// ports and the probes on /healthz and /readyz of the "probes" port.
func CheckPodSpec(t *testing.T, pod corev1.PodSpec, ports map[string]int32) {
	t.Helper()
	psc, ctr := pod.SecurityContext, pod.Containers[0]
	sc := ctr.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("the pod does not run as non-root: %+v", psc)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("the pod's seccomp profile is not RuntimeDefault: %+v", psc.SeccompProfile)
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("the container may escalate privileges: %+v", sc)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("the container's root filesystem is writable")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("the container does not drop ALL capabilities: %+v", sc.Capabilities)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("the container is not restricted itself: %+v", sc)
	}
	if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", ctr.Resources)
	}
	got := map[string]int32{}
	for _, p := range ctr.Ports {
		got[p.Name] = p.ContainerPort
	}
	if !reflect.DeepEqual(got, ports) {
		t.Errorf("container ports %v, want %v", got, ports)
	}
	for probe, path := range map[*corev1.Probe]string{ctr.LivenessProbe: "/healthz", ctr.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "probes" {
			t.Errorf("want an HTTP probe on probes%s, got %+v", path, probe)
		}
	}
	if !slices.Contains(ctr.Args, fmt.Sprintf("--health-probe-bind-address=:%d", ports["probes"])) {
		t.Errorf("the probes port %d is not the one the process listens on: %q", ports["probes"], ctr.Args)
	}
}

// CheckHubWiring checks that the hub chart's objects refer to each other: the bindings to the
// pod's ServiceAccount, the leader election Role in the namespace of the Lease, the gateway Role
// in the gateway's namespace, the metrics Service to the pod and its metrics port.
func CheckHubWiring(t *testing.T, r *Rendered, dep *appsv1.Deployment, ns string) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range r.ByKind(kind) {
			if kind == "ClusterRoleBinding" && (strings.HasSuffix(b.GetName(), "-metrics-reader") || strings.HasSuffix(b.GetName(), "-ui-viewer")) {
				continue // binds metrics.readerSubjects or ui.viewerSubjects (Prometheus, the viewers), not the hub
			}
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			if s := fmt.Sprint(subjects); len(subjects) != 1 || !strings.Contains(s, "name:"+pod.ServiceAccountName+" ") || !strings.Contains(s, "namespace:"+ns) {
				t.Errorf("%s %s binds %s, not the pod's ServiceAccount %s/%s", kind, b.GetName(), s, ns, pod.ServiceAccountName)
			}
		}
	}
	for _, role := range r.ByKind("Role") {
		switch {
		case strings.HasSuffix(role.GetName(), "-leader-election"):
			if !strings.Contains(args, "--leader-election-namespace="+role.GetNamespace()) {
				t.Errorf("leader election Role in %s, the Lease in: %s", role.GetNamespace(), args)
			}
		case strings.HasSuffix(role.GetName(), "-cluster-inventory"):
			if !strings.Contains(args, "--gateway-secret-namespace="+role.GetNamespace()) {
				t.Errorf("gateway Secrets Role in %s, the hub reads: %s", role.GetNamespace(), args)
			}
		default:
			t.Errorf("unexpected Role %s", role.GetName())
		}
	}
	svc := &corev1.Service{}
	var metrics *unstructured.Unstructured
	for _, o := range r.ByKind("Service") {
		if strings.HasSuffix(o.GetName(), "-metrics") {
			metrics = o
		}
	}
	if metrics == nil {
		t.Fatalf("no metrics Service")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(metrics.Object, svc); err != nil {
		t.Fatal(err)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the metrics Service's selector %v does not select the hub's pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if !labels.SelectorFromSet(dep.Spec.Selector.MatchLabels).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the Deployment's selector does not select its pods")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("the metrics Service's ports %+v: want one port named metrics on the container's metrics port", svc.Spec.Ports)
	}
}

// CheckServiceMonitor decodes the ServiceMonitor strictly and checks that it scrapes the
// metrics Service: its selector, namespace and port; over https with a bearer token when the hub
// serves its metrics securely, verifying the hub's certificate when it has one
// (--metrics-cert-dir) and otherwise not (a self-signed certificate).
func CheckServiceMonitor(t *testing.T, r *Rendered, dep *appsv1.Deployment, port int32) {
	t.Helper()
	sm := r.One(t, "ServiceMonitor")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s", sm.GetAPIVersion())
	}
	type secretKey struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
	var spec struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Path            string `json:"path"`
			Scheme          string `json:"scheme"`
			Interval        string `json:"interval"`
			ScrapeTimeout   string `json:"scrapeTimeout"`
			BearerTokenFile string `json:"bearerTokenFile"`
			Authorization   *struct {
				Type        string    `json:"type"`
				Credentials secretKey `json:"credentials"`
			} `json:"authorization"`
			TLSConfig *struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
				CA                 *struct {
					Secret secretKey `json:"secret"`
				} `json:"ca"`
				ServerName string `json:"serverName"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	}
	data, _ := json.Marshal(sm.Object["spec"])
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		t.Fatalf("ServiceMonitor spec: %v", err)
	}
	svc := r.One(t, "Service")
	sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil || !sel.Matches(labels.Set(svc.GetLabels())) {
		t.Errorf("the ServiceMonitor's selector %v does not select the metrics Service %v (%v)", spec.Selector, svc.GetLabels(), err)
	}
	if !slices.Equal(spec.NamespaceSelector.MatchNames, []string{svc.GetNamespace()}) {
		t.Errorf("the ServiceMonitor looks in %v, the Service is in %s", spec.NamespaceSelector.MatchNames, svc.GetNamespace())
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(spec.Endpoints) != 1 || spec.Endpoints[0].Port != "metrics" || spec.Endpoints[0].Path != "/metrics" || len(ports) != 1 ||
		!strings.Contains(fmt.Sprint(ports), fmt.Sprintf("port:%d", port)) {
		t.Fatalf("the ServiceMonitor's endpoints %+v do not scrape the Service's metrics port %v", spec.Endpoints, ports)
	}
	ep := spec.Endpoints[0]
	args := dep.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--metrics-secure=true") {
		if ep.Scheme != "http" || ep.BearerTokenFile != "" || ep.Authorization != nil || ep.TLSConfig != nil {
			t.Errorf("the hub serves plain HTTP; the ServiceMonitor's endpoint %+v", ep)
		}
		return
	}
	// Prometheus's own token when the hub accepts API tokens, else the projected token of the
	// hub's audience that Prometheus mounts.
	tokenFile := "/var/run/secrets/kubernetes.io/serviceaccount/token"
	if !slices.Contains(args, "--metrics-auth-audiences=") {
		tokenFile = "/var/run/secrets/policyhub/token"
	}
	switch {
	case ep.Scheme != "https":
		t.Errorf("the hub serves https; the ServiceMonitor scrapes %q", ep.Scheme)
	case ep.Authorization == nil && ep.BearerTokenFile != tokenFile:
		t.Errorf("the ServiceMonitor sends no token the hub accepts (bearerTokenFile %q, want %q)", ep.BearerTokenFile, tokenFile)
	case ep.Authorization != nil && (ep.BearerTokenFile != "" || ep.Authorization.Type != "Bearer" || ep.Authorization.Credentials.Name == ""):
		t.Errorf("the ServiceMonitor's authorization %+v (bearerTokenFile %q)", ep.Authorization, ep.BearerTokenFile)
	case ep.TLSConfig == nil:
		t.Errorf("the ServiceMonitor has no tlsConfig")
	}
	certDir := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-cert-dir=") })
	if ep.TLSConfig == nil {
		return
	}
	if !certDir {
		if !ep.TLSConfig.InsecureSkipVerify || ep.TLSConfig.CA != nil {
			t.Errorf("a self-signed hub certificate: want insecureSkipVerify, got %+v", ep.TLSConfig)
		}
		return
	}
	var certSecret string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "metrics-cert" && v.Secret != nil {
			certSecret = v.Secret.SecretName
		}
	}
	if ep.TLSConfig.InsecureSkipVerify || ep.TLSConfig.CA == nil || ep.TLSConfig.CA.Secret != (secretKey{certSecret, "ca.crt"}) ||
		ep.TLSConfig.ServerName != svc.GetName()+"."+svc.GetNamespace()+".svc" {
		t.Errorf("the hub's certificate is Secret %s: want it verified with its ca.crt for %s.%s.svc, got %+v",
			certSecret, svc.GetName(), svc.GetNamespace(), ep.TLSConfig)
	}
}

// CheckNetworkPolicy decodes the chart's NetworkPolicy strictly and checks that it selects
// the pods and lets in only what they serve: the named ports of the container, the probes port
// from anywhere (the kubelet), any other port only from the peers given; with egress restricted,
// the apiservers' addresses are let out.
func CheckNetworkPolicy(t *testing.T, r *Rendered, dep *appsv1.Deployment) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(r.One(t, "NetworkPolicy").Object, np, true); err != nil {
		t.Fatalf("the NetworkPolicy does not decode strictly: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the NetworkPolicy's selector %v does not select the pods %v (%v)", np.Spec.PodSelector, dep.Spec.Template.Labels, err)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("the NetworkPolicy does not restrict ingress: %v", np.Spec.PolicyTypes)
	}
	served := map[string]bool{}
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		served[p.Name] = true
	}
	probes := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || !served[p.Port.String()] {
				t.Errorf("ingress to port %v, which the container does not name (%v)", p.Port, served)
				continue
			}
			switch {
			case p.Port.String() == "probes":
				probes = len(rule.From) == 0
			case len(rule.From) == 0:
				t.Errorf("port %s is open to anyone", p.Port)
			}
		}
		if len(rule.Ports) == 0 {
			t.Errorf("an ingress rule for every port: %+v", rule)
		}
	}
	if !probes {
		t.Errorf("the probes port is not open to the kubelet: %+v", np.Spec.Ingress)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		if len(np.Spec.Egress) > 0 {
			t.Errorf("egress rules without the Egress policy type")
		}
		return
	}
	if len(np.Spec.Egress) == 0 || len(np.Spec.Egress[0].To) == 0 || np.Spec.Egress[0].To[0].IPBlock == nil {
		t.Errorf("egress restricted, but the apiserver's addresses are not let out: %+v", np.Spec.Egress)
	}
}

// CheckDisruptionBudget decodes the chart's PodDisruptionBudget strictly and checks that it
// covers the pods and can never block a drain for good: it lets a replica go.
func CheckDisruptionBudget(t *testing.T, r *Rendered, dep *appsv1.Deployment) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(r.One(t, "PodDisruptionBudget").Object, pdb, true); err != nil {
		t.Fatalf("the PodDisruptionBudget does not decode strictly: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the pods %v (%v)", pdb.Spec.Selector, dep.Spec.Template.Labels, err)
	}
	replicas := int(ptr.Deref(dep.Spec.Replicas, 1))
	switch {
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil:
		t.Errorf("both minAvailable and maxUnavailable: %+v", pdb.Spec)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int && pdb.Spec.MinAvailable.IntValue() >= replicas:
		t.Errorf("minAvailable %s with %d replicas: no drain could ever evict one", pdb.Spec.MinAvailable, replicas)
	case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.Type == intstr.Int && pdb.Spec.MaxUnavailable.IntValue() < 1:
		t.Errorf("maxUnavailable %s: no drain could ever evict one", pdb.Spec.MaxUnavailable)
	case pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil:
		t.Errorf("a budget of nothing: %+v", pdb.Spec)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow (a crash-looping replica never holds up a drain)", p)
	}
}

// CheckWebView: the view's certificate is mounted where --ui-cert-dir reads it, its Service
// reaches the container's ui port, only ui.from may connect, and the viewers are bound.
func CheckWebView(t *testing.T, r *Rendered, dep *appsv1.Deployment) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && m.MountPath == "/etc/policyhub/ui-cert" && v.Secret != nil && v.Secret.SecretName == "ui-cert" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret ui-cert is not mounted at /etc/policyhub/ui-cert: %+v %+v", pod.Containers[0].VolumeMounts, pod.Volumes)
	}
	found := false
	for _, svc := range r.ByKind("Service") {
		if strings.HasSuffix(svc.GetName(), "-ui") {
			found = true
			if ports := fmt.Sprint(svc.Object["spec"].(map[string]any)["ports"]); !strings.Contains(ports, "targetPort:ui") || !strings.Contains(ports, "port:9443") {
				t.Errorf("the view's Service ports %s", ports)
			}
		}
	}
	if !found {
		t.Error("no Service for the web view")
	}
	np := fmt.Sprint(r.One(t, "NetworkPolicy").Object["spec"])
	if !strings.Contains(np, "port:ui") || !strings.Contains(np, "kubernetes.io/metadata.name:auth-proxy") {
		t.Errorf("the NetworkPolicy does not admit ui.from to the view: %s", np)
	}
	var subjects string
	for _, b := range r.ByKind("ClusterRoleBinding") {
		if strings.HasSuffix(b.GetName(), "-ui-viewer") {
			subjects = fmt.Sprint(b.Object["subjects"])
		}
	}
	if !strings.Contains(subjects, "kind:Group name:platform") {
		t.Errorf("the viewer binding's subjects %q are not ui.viewerSubjects", subjects)
	}
}
