package e2e

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/internal/charttest"
)

// The hub chart renders the admission fence of exception approvals wherever
// ValidatingAdmissionPolicy v1 is served, the chart's whole range (1.30+), also for `helm template`
// without --api-versions, and as the hub's own fence check expects it: a hub of 1.30–1.35 checks
// the requester a writer sets (no MutatingAdmissionPolicy there), one of 1.36 also stamps it. Only
// an explicit exceptions.admissionPolicy=false leaves the fence out, and the notes say that no
// approval counts then.
func TestChartRendersTheExceptionFenceEverywhere(t *testing.T) {
	fence, err := declare.NewExceptionFence()
	if err != nil {
		t.Fatal(err)
	}
	// `helm template` without --kube-version or --api-versions: Helm 3.20's release binary says
	// Kubernetes 1.35 (its client-go's) and knows group versions only, no kinds.
	template := charttest.HelmTemplate()
	// A 1.33 hub as `helm install` discovers it: VAP v1, MAP only in alpha.
	k133 := chartutil.DefaultCapabilities.Copy()
	k133.KubeVersion = chartutil.KubeVersion{Version: "v1.33.4", Major: "1", Minor: "33"}
	k133.APIVersions = append(chartutil.VersionSet{}, k133.APIVersions...)
	k133.APIVersions = append(k133.APIVersions, "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io/v1alpha1/MutatingAdmissionPolicy")
	for _, c := range []struct {
		name   string
		caps   *chartutil.Capabilities
		values string
		stamp  bool
		notes  string
	}{
		{"helm template without --api-versions", template, `{}`, false, "so writers set spec.requestedBy (and spec.changedBy) to themselves"},
		{"a 1.33 hub", k133, `{}`, false, "This hub does not serve MutatingAdmissionPolicy"},
		{"the fleet's 1.36 hub", hubCapabilities(t), `{}`, true, "requesters are stamped by the hub"},
		{"helm template, stamping asked for", template, `{exceptions: {stampRequester: true}}`, true, "requesters are stamped"},
		{"the fleet's 1.36 hub, stamping off", hubCapabilities(t), `{exceptions: {stampRequester: false}}`, false, "writers set spec.requestedBy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := charttest.Render(t, hubChartDir, "fleet-hub", "policyhub-system", charttest.Values(t, c.values), c.caps)
			if err != nil {
				t.Fatal(err)
			}
			if missing := fence.Missing(typedAll[admissionregistrationv1.ValidatingAdmissionPolicy](t, r, "ValidatingAdmissionPolicy"),
				typedAll[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r, "ValidatingAdmissionPolicyBinding")); missing != "" {
				t.Errorf("the hub would count no approval with what the chart renders: %s", missing)
			}
			stamped := false
			for _, m := range r.ByKind("MutatingAdmissionPolicy") {
				stamped = stamped || strings.HasSuffix(m.GetName(), "-exception-requester")
			}
			if stamped != c.stamp {
				t.Errorf("the requester stamp rendered: %t, want %t", stamped, c.stamp)
			}
			if !strings.Contains(strings.Join(strings.Fields(r.Notes), " "), c.notes) {
				t.Errorf("the notes do not say %q:\n%s", c.notes, r.Notes)
			}
		})
	}

	r := mustRender(t, hubChartDir, "fleet-hub", "policyhub-system", charttest.Values(t, `{exceptions: {admissionPolicy: false}}`))
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, o := range r.ByKind(kind) {
			if strings.Contains(o.GetName(), "exception") {
				t.Errorf("exceptions.admissionPolicy=false rendered %s %s", kind, o.GetName())
			}
		}
	}
	if want := "the hub counts NO approval of a FleetPolicyException until config/admission/exceptions.yaml is"; !strings.Contains(strings.Join(strings.Fields(r.Notes), " "), want) {
		t.Errorf("without the fence the notes do not say %q:\n%s", want, r.Notes)
	}

	for _, bad := range []struct{ values, want string }{
		{`exceptions: {stampRequester: sometimes}`, "'/exceptions/stampRequester'"},
		{`exceptions: {approvableServiceAccounts: [kustomize-controller]}`, "'/exceptions/approvableServiceAccounts/0'"},
		{`exceptions: {approvableServiceAccounts: ["flux-system/x,y/z"]}`, "'/exceptions/approvableServiceAccounts/0'"},
	} {
		if _, err := renderChart(t, hubChartDir, "fleet-hub", "policyhub-system", charttest.Values(t, bad.values)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("values %s: %v, want a refusal naming %s", bad.values, err, bad.want)
		}
	}
}

// typedAll converts the rendered objects of a kind to their typed form.
func typedAll[T any](t *testing.T, r *charttest.Rendered, kind string) []T {
	t.Helper()
	var out []T
	for _, o := range r.ByKind(kind) {
		var v T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
		out = append(out, v)
	}
	return out
}
