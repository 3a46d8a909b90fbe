package collect

import (
	"context"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Both report APIs decode into openreports' typed Report and ClusterReport:
// openreports.io/v1alpha1 is wgpolicyk8s.io/v1alpha2 (Kyverno's default) carried on under a new
// group, with the same schema (scope; results[] with policy, rule, result, severity, category,
// source, timestamp, message, resources), so one typed shape reads all four kinds.
var wgpolicyGV = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}

// reportKinds are the kinds of ReportKinds' resources.
var reportKinds = map[schema.GroupVersionResource]string{
	ReportKinds[0]: "PolicyReport", ReportKinds[1]: "ClusterPolicyReport",
	ReportKinds[2]: "Report", ReportKinds[3]: "ClusterReport",
}

// reportScheme knows the four report kinds, each as openreports' type.
func reportScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := openreportsv1alpha1.Install(s); err != nil {
		return nil, err
	}
	s.AddKnownTypeWithName(wgpolicyGV.WithKind("PolicyReport"), &openreportsv1alpha1.Report{})
	s.AddKnownTypeWithName(wgpolicyGV.WithKind("PolicyReportList"), &openreportsv1alpha1.ReportList{})
	s.AddKnownTypeWithName(wgpolicyGV.WithKind("ClusterPolicyReport"), &openreportsv1alpha1.ClusterReport{})
	s.AddKnownTypeWithName(wgpolicyGV.WithKind("ClusterPolicyReportList"), &openreportsv1alpha1.ClusterReportList{})
	metav1.AddToGroupVersion(s, wgpolicyGV)
	return s, nil
}

// reportClients are REST clients of the two report group versions, decoding into openreports'
// types straight from JSON (no unstructured maps in between).
type reportClients struct {
	clients map[schema.GroupVersion]rest.Interface
	params  runtime.ParameterCodec
}

func newReportClients(cfg *rest.Config) (*reportClients, error) {
	scheme, err := reportScheme()
	if err != nil {
		return nil, err
	}
	rc := &reportClients{clients: map[schema.GroupVersion]rest.Interface{}, params: runtime.NewParameterCodec(scheme)}
	for _, gv := range []schema.GroupVersion{wgpolicyGV, openreportsv1alpha1.SchemeGroupVersion} {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
		client, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("client of %s: %w", gv, err)
		}
		rc.clients[gv] = client
	}
	return rc, nil
}

// listWatch lists and watches gvr's reports, typed.
func (rc *reportClients) listWatch(gvr schema.GroupVersionResource) *cache.ListWatch {
	client := rc.clients[gvr.GroupVersion()]
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			var out runtime.Object = &openreportsv1alpha1.ClusterReportList{}
			if namespacedReports(gvr) {
				out = &openreportsv1alpha1.ReportList{}
			}
			err := client.Get().Resource(gvr.Resource).VersionedParams(&o, rc.params).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return client.Get().Resource(gvr.Resource).VersionedParams(&o, rc.params).Watch(ctx)
		},
	}
}

// exampleReport is the typed object gvr's informer holds.
func exampleReport(gvr schema.GroupVersionResource) runtime.Object {
	if namespacedReports(gvr) {
		return &openreportsv1alpha1.Report{}
	}
	return &openreportsv1alpha1.ClusterReport{}
}

// namespacedReports says whether gvr's reports are namespaced (PolicyReport, Report).
func namespacedReports(gvr schema.GroupVersionResource) bool {
	return reportKinds[gvr] == "PolicyReport" || reportKinds[gvr] == "Report"
}
