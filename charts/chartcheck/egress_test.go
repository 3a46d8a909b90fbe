package chartcheck

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/policyhub/policyhub/internal/charttest"
)

// egressRule is one egress rule, flattened: where to (ipBlocks, or namespace and pod labels) and
// on which ports.
type egressRule struct {
	to    []string
	ports []string
}

func flattenEgress(t *testing.T, r *charttest.Rendered) ([]networkingv1.PolicyType, []egressRule) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(r.One(t, "NetworkPolicy").Object, np, true); err != nil {
		t.Fatalf("the NetworkPolicy does not decode strictly: %v", err)
	}
	var rules []egressRule
	for _, e := range np.Spec.Egress {
		var rule egressRule
		for _, peer := range e.To {
			switch {
			case peer.IPBlock != nil:
				rule.to = append(rule.to, "cidr "+peer.IPBlock.CIDR)
			case peer.NamespaceSelector != nil && peer.PodSelector != nil:
				rule.to = append(rule.to, fmt.Sprintf("ns %v pods %v", peer.NamespaceSelector.MatchLabels, peer.PodSelector.MatchLabels))
			default:
				rule.to = append(rule.to, fmt.Sprintf("broad peer %+v", peer))
			}
		}
		for _, p := range e.Ports {
			rule.ports = append(rule.ports, fmt.Sprintf("%s/%v", *p.Protocol, p.Port))
		}
		rules = append(rules, rule)
	}
	return np.Spec.PolicyTypes, rules
}

// With egress restricted, the hub may reach exactly what it needs: its apiserver, DNS, Flux's
// source-controller pods on their storage port, and the OCI registries listed, each only on its
// ports; no rule lets it anywhere else (a rule without peers or without ports would). The flags
// fence the hub's own fetches alike: --flux-source-namespaces and --flux-artifact-host.
func TestChartHubEgressAllowsExactlyWhatTheHubNeeds(t *testing.T) {
	for _, c := range []struct {
		name, values string
		want         []egressRule
		args         []string
	}{
		{"defaults: egress open, the hub fences its own fetches", `{}`, nil,
			[]string{"--flux-source-namespaces=flux-system", "--flux-artifact-host=source-controller.flux-system.svc.cluster.local"}},
		{"restricted, with registries", `
networkPolicy: {egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32], registryCIDRs: [203.0.113.0/24, "2001:db8::/32"], registryPorts: [443, 5000]}}
flux: {sourceNamespaces: [flux-system, platform-sources], artifactHost: "http://source-controller.flux-system.svc.cluster.local."}`,
			[]egressRule{
				{to: []string{"cidr 10.0.0.1/32"}, ports: []string{"TCP/443", "TCP/6443"}},
				{to: []string{"ns map[kubernetes.io/metadata.name:kube-system] pods map[k8s-app:kube-dns]"}, ports: []string{"UDP/53", "TCP/53"}},
				{to: []string{"ns map[kubernetes.io/metadata.name:flux-system] pods map[app:source-controller]"}, ports: []string{"TCP/9090"}},
				{to: []string{"cidr 203.0.113.0/24", "cidr 2001:db8::/32"}, ports: []string{"TCP/443", "TCP/5000"}},
			},
			[]string{"--flux-source-namespaces=flux-system,platform-sources", "--flux-artifact-host=http://source-controller.flux-system.svc.cluster.local."}},
		{"restricted, no Flux, no registry, no DNS", `
networkPolicy: {egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32], dns: false, sourceController: {enabled: false}}}
flux: {sourceNamespaces: []}`,
			[]egressRule{{to: []string{"cidr 10.0.0.1/32"}, ports: []string{"TCP/443", "TCP/6443"}}},
			[]string{"--flux-source-namespaces="}},
		// Maps merge with the defaults: a default label is dropped with null.
		{"Flux elsewhere", `
networkPolicy: {egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32], dns: false, sourceController: {namespace: gitops, podLabels: {app: null, app.kubernetes.io/name: source-controller}, port: 8080}}}
flux: {sourceNamespaces: [gitops], artifactHost: "source-controller.gitops.svc.cluster.local:8080"}`,
			[]egressRule{
				{to: []string{"cidr 10.0.0.1/32"}, ports: []string{"TCP/443", "TCP/6443"}},
				{to: []string{"ns map[kubernetes.io/metadata.name:gitops] pods map[app.kubernetes.io/name:source-controller]"}, ports: []string{"TCP/8080"}},
			},
			[]string{"--flux-source-namespaces=gitops", "--flux-artifact-host=source-controller.gitops.svc.cluster.local:8080"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := charttest.MustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", charttest.Values(t, c.values), charttest.HelmTemplate())
			types, rules := flattenEgress(t, r)
			if restricted := slices.Contains(types, networkingv1.PolicyTypeEgress); restricted != (c.want != nil) {
				t.Fatalf("egress restricted: %v, want %v", restricted, c.want != nil)
			}
			if got, want := fmt.Sprint(rules), fmt.Sprint(c.want); got != want {
				t.Errorf("egress rules\n%s\nwant\n%s", got, want)
			}
			for _, rule := range rules {
				if len(rule.to) == 0 || len(rule.ports) == 0 || strings.Contains(fmt.Sprint(rule.to), "broad peer") {
					t.Errorf("a rule that lets the hub anywhere, or on any port: %+v", rule)
				}
			}
			args := charttest.Deployment(t, r).Spec.Template.Spec.Containers[0].Args
			for _, a := range c.args {
				if !slices.Contains(args, a) {
					t.Errorf("args %q lack %q", args, a)
				}
			}
		})
	}
	for _, bad := range []struct{ values, want string }{
		{`flux: {sourceNamespaces: [Team_A]}`, "'/flux/sourceNamespaces/0'"},
		{`flux: {artifactHost: "http://storage/path"}`, "'/flux/artifactHost'"},
		{`flux: {artifactHost: "http://user@storage"}`, "'/flux/artifactHost'"},
		{`networkPolicy: {egress: {registryCIDRs: [registry.example.com]}}`, "'/networkPolicy/egress/registryCIDRs/0'"},
		{`networkPolicy: {egress: {sourceController: {port: 0}}}`, "'/networkPolicy/egress/sourceController/port'"},
	} {
		if _, err := charttest.Render(t, hubChartDir, "release", "policyhub-system", charttest.Values(t, bad.values), charttest.HelmTemplate()); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("values %s: %v, want refused naming %s", bad.values, err, bad.want)
		}
	}
}
