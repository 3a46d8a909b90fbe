package pages

import (
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

// A cluster's namespaces are the agent's own counts when it sends them; from an older agent,
// they are summed from its applications and namespaced policies, and the page says so.
func TestClusterNamespaces(t *testing.T) {
	s := &read.Snapshot{Now: time.Now()}
	full := summary("c1", policyhubv1.PolicySummary{Name: "limits", Namespace: "shop", Results: policyhubv1.ResultCounts{Fail: 2}})
	full.Spec.Applications = []policyhubv1.ApplicationSummary{
		{Namespace: "shop", Name: "shop", Policy: "latest", Results: policyhubv1.ResultCounts{Fail: 1}},
		{Namespace: "blog", Name: "blog", Policy: "latest", Results: policyhubv1.ResultCounts{Pass: 4}},
	}
	derived := BuildCluster(s, "c1", &full)
	if !derived.NamespacesDerived || len(derived.Namespaces) != 2 || derived.Namespaces[0].Namespace != "shop" ||
		derived.Namespaces[0].Violations != 3 || derived.Namespaces[0].Applications != 1 || derived.Namespaces[1].Results.Pass != 4 {
		t.Errorf("derived namespaces %+v", derived.Namespaces)
	}
	full.Spec.Namespaces = []policyhubv1.NamespaceSummary{
		{Namespace: "blog", Results: policyhubv1.ResultCounts{Pass: 4}},
		{Namespace: "quiet", Blocked: 2},
		{Namespace: "shop", Results: policyhubv1.ResultCounts{Fail: 9, Error: 1}},
	}
	counted := BuildCluster(s, "c1", &full)
	if counted.NamespacesDerived || len(counted.Namespaces) != 3 {
		t.Fatalf("counted namespaces %+v", counted.Namespaces)
	}
	if n := counted.Namespaces[0]; n.Namespace != "shop" || n.Violations != 10 || n.Applications != 1 {
		t.Errorf("the worst namespace %+v, want shop with the agent's 10 violations and its application", n)
	}
	if n := counted.Namespaces[2]; n.Namespace != "quiet" || n.Blocked != 2 {
		t.Errorf("the last namespace %+v, want quiet with 2 refusals", n)
	}
}
