package collect

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A cluster that does not serve Kyverno's report APIs (Kyverno not installed yet) is a fact the
// agent reports at once, not an error it retries on: through the memory-cached discovery the
// agent uses, an unserved group answers ErrCacheNotFound, which must read as "not served".
func TestServedTreatsMissingAPIsAsAnswers(t *testing.T) {
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "openreports.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "reports", Namespaced: true, Kind: "Report"}}},
	}}}
	cached := memory.NewMemCacheClient(fake)
	for _, tt := range []struct {
		gvr  schema.GroupVersionResource
		want bool
	}{
		{schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"}, true},
		{schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"}, false},
		{schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}, false},
	} {
		got, err := served(cached, tt.gvr)
		if err != nil {
			t.Errorf("%s: %v, want an answer", tt.gvr, err)
		}
		if got != tt.want {
			t.Errorf("%s served = %v, want %v", tt.gvr, got, tt.want)
		}
	}
}
