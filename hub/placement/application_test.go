package placement

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

const velaApp = `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components: []
  policies:
  - {name: limits, type: kyverno-policy, properties: {mode: Audit}}
  - {name: staging, type: topology, properties: {clusters: [c1, gone]}}
  - {name: prod, type: topology, properties: {clusterLabelSelector: {env: prod}, namespace: shop-prod}}
`

func TestApplicationPolicyPlacement(t *testing.T) {
	app := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(velaApp), &app.Object); err != nil {
		t.Fatal(err)
	}
	topologies, err := Topologies(app)
	if err != nil {
		t.Fatal(err)
	}
	if len(topologies) != 2 || topologies[1].Namespace != "shop-prod" || topologies[1].Placement.ClusterSelector.MatchLabels["env"] != "prod" {
		t.Fatalf("topologies %+v", topologies)
	}
	inv := Inventory{Clusters: []Cluster{{Name: "c1", Labels: map[string]string{"env": "staging"}}, {Name: "c2", Labels: map[string]string{"env": "prod"}}, {Name: "c3", Labels: map[string]string{"env": "prod"}}}}
	ap := &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "shop"}}

	for _, tc := range []struct {
		name        string
		placement   *policyhubv1.Placement
		topologies  []Topology
		want        string
		wantUnknown string
	}{
		{name: "the application's topologies, each with its namespace", topologies: topologies,
			want: "[{c1 shop false} {c2 shop-prod false} {c3 shop-prod false}]", wantUnknown: "[gone]"},
		{name: "the ApplicationPolicy's own placement wins, in its namespace", placement: &policyhubv1.Placement{Clusters: []string{"c3"}}, topologies: topologies,
			want: "[{c3 shop false}]", wantUnknown: "[]"},
		{name: "neither selects nothing", want: "[]", wantUnknown: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap.Spec.Placement = tc.placement
			sel, err := ApplicationPolicy(ap, tc.topologies, inv, everywhere(inv, "shop", "shop", "shop-prod"))
			if err != nil {
				t.Fatal(err)
			}
			got, unknown := sel.Targets, sel.Unknown
			if fmt.Sprint(got) != tc.want || fmt.Sprint(unknown) != tc.wantUnknown {
				t.Errorf("got %v unknown %v, want %s %s", got, unknown, tc.want, tc.wantUnknown)
			}
		})
	}
}
