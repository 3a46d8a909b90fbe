package collect

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakeclientset "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/policyhub/policyhub/internal/logtest"
)

// withoutKyverno is the discovery of a cluster where Kyverno is not installed: none of its report
// or policy APIs is served.
var withoutKyverno = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "events", Namespaced: true, Kind: "Event"}, {Name: "pods", Namespaced: true, Kind: "Pod"}}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true, Kind: "Deployment"}}},
	{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}}},
}

// aggregatedDiscovery answers as a kube-apiserver's aggregated discovery does: every group
// version in one response, those it could not describe as failed (e.g. an aggregated API whose
// server is down), the others with their resources.
type aggregatedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu     sync.Mutex
	failed map[schema.GroupVersion]error
}

func newAggregatedDiscovery(resources []*metav1.APIResourceList) *aggregatedDiscovery {
	return &aggregatedDiscovery{
		FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: resources}},
		failed:        map[schema.GroupVersion]error{},
	}
}

func (d *aggregatedDiscovery) fail(gv schema.GroupVersion, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.failed, gv)
	} else {
		d.failed[gv] = err
	}
}

func (d *aggregatedDiscovery) GroupsAndMaybeResources() (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return nil, nil, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	resources, failed := map[schema.GroupVersion]*metav1.APIResourceList{}, map[schema.GroupVersion]error{}
	for _, l := range d.Resources {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := d.failed[gv]; err != nil {
			failed[gv] = err
		} else {
			resources[gv] = l
		}
	}
	return groups, resources, failed, nil
}

// fakeCollector is a Collector on fake clients, discovering through d.
func fakeCollector(d discovery.DiscoveryInterface) *Collector {
	return newCollector(Options{DiscoveryInterval: 30 * time.Second}, nil, metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), fakeclientset.NewClientset(), d)
}

// A genuine discovery failure (the cluster lists Kyverno's policy API but cannot describe it, as
// when the server behind it is down; a kube-apiserver answers so only while an aggregated API's
// server is failing, which the local fleet cannot make on demand, hence discovery's own fake here;
// a cluster without Kyverno is tested against a real one in e2e/agent_without_kyverno_test.go) keeps the collector unsynced and is logged once while it lasts,
// not every DiscoveryInterval; its end is logged too.
func TestCollectorLogsDiscoveryFailureOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kyverno := schema.GroupVersion{Group: "kyverno.io", Version: "v1"}
		d := newAggregatedDiscovery(append(slices.Clone(withoutKyverno), &metav1.APIResourceList{
			GroupVersion: kyverno.String(), APIResources: []metav1.APIResource{{Name: "clusterpolicies", Kind: "ClusterPolicy"}},
		}))
		d.fail(kyverno, errors.New("the server is currently unable to handle the request"))
		c := fakeCollector(d)
		logs := &logtest.Lines{}
		ctx, cancel := context.WithCancel(logs.Context(context.Background()))
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(2*time.Minute + time.Second) // five discoveries
		synctest.Wait()
		if c.Synced() {
			t.Error("synced although discovery never succeeded")
		}
		if n := logs.Count("discovery of report and policy APIs failed"); n != 1 {
			t.Errorf("the failure was logged %d times in five attempts, want once: %v", n, logs)
		}
		d.fail(kyverno, nil)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := logs.Count("succeeded after failing"); n != 1 {
			t.Errorf("the recovery was logged %d times, want once", n)
		}
		if !c.Synced() {
			t.Error("not synced after discovery recovered")
		}
		c.mu.Lock()
		_, watched := c.policies[kyverno.WithResource("clusterpolicies")]
		c.mu.Unlock()
		if !watched {
			t.Error("ClusterPolicies not watched after discovery recovered")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
