package collect

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// policyMetadata is a ValidatingPolicy at version, as the metadata API returns it.
func policyMetadata(version, title string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policies.kyverno.io/" + version, Kind: "ValidatingPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "no-latest", Annotations: map[string]string{annotationTitle: title, annotationSeverity: "high"}},
	}
}

// servedCEL is discovery's answer of a cluster serving ValidatingPolicy at versions.
func servedCEL(versions ...string) []*metav1.APIResourceList {
	var lists []*metav1.APIResourceList
	for _, v := range versions {
		lists = append(lists, &metav1.APIResourceList{GroupVersion: "policies.kyverno.io/" + v,
			APIResources: []metav1.APIResource{{Name: "validatingpolicies", Kind: "ValidatingPolicy"}}})
	}
	return lists
}

// The agent reads the CEL kinds at the version the cluster serves: v1beta1 on Kyverno 1.16, which
// serves no v1, and v1 once the cluster serves it (Kyverno upgraded), discovered again as any API.
func TestCollectorReadsCELKindsAtTheServedVersion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: servedCEL("v1alpha1", "v1beta1")}}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme,
		policyMetadata("v1beta1", "from v1beta1"), policyMetadata("v1", "from v1"))
	c := newCollector(Options{DiscoveryInterval: time.Hour}, nil, md, fake.NewClientset(), disco)

	titleOnceSynced := func(version string) string {
		t.Helper()
		if err := c.discover(ctx); err != nil {
			t.Fatalf("discover: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !c.Synced() {
			if time.Now().After(deadline) {
				t.Fatalf("informers not synced after discovering %s", version)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.mu.Lock()
		got := c.policies[PolicyKinds[2].GroupResource].version
		c.mu.Unlock()
		if got != version {
			t.Fatalf("ValidatingPolicy read at %q, want %s", got, version)
		}
		return c.Snapshot().Policies[PolicyKey{Kind: "ValidatingPolicy", Name: "no-latest"}].Title
	}
	if got := titleOnceSynced("v1beta1"); got != "from v1beta1" {
		t.Errorf("title on a 1.16 cluster = %q, want the v1beta1 object's", got)
	}
	disco.Resources = servedCEL("v1alpha1", "v1beta1", "v1")
	if got := titleOnceSynced("v1"); got != "from v1" {
		t.Errorf("title once v1 is served = %q, want the v1 object's", got)
	}
}
