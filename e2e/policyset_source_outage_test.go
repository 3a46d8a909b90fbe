package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/internal/registrytest"
)

// A registry that cannot be reached changes nothing in the clusters: they keep the last version
// read, SourceReady turns False saying why (and a Warning Event says it once), the set stays
// Ready. Once the registry is back, the version its tag names now reaches the clusters.
func TestPolicySetKeepsTheLastGoodVersionWhileItsSourceIsDown(t *testing.T) {
	startHub(t, time.Hour)
	const ns, user, password, name = "pset-outage-e2e", "platform", "s3cret", "e2e-pset-outage"
	reg := registrytest.Start(t, user, password)
	ref := reg.Host + "/policies/outage:stable"
	v1 := kyvernoPush(t, ref, user, password, map[string]string{"team.yaml": psAuditPolicy("pset-outage-team", ns, "team", "label team is required")})
	registrySecret(t, "outage-registry", reg.Host, user, password)
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    oci: {ref: %q, secretRef: {name: outage-registry}, interval: 10m}
  placement: {clusters: [cluster-1, cluster-2]}
`, name, ref))
	waitPolicySet(t, name, "version 1 in force", setInForce(v1, "cluster-1", "cluster-2"))
	before := clusterPolicy(t, "cluster-1", "pset-outage-team").GetResourceVersion()

	// A new version is pushed, and the registry goes dark before the hub reads it; a spec change
	// makes the hub read at once.
	v2 := kyvernoPush(t, ref, user, password, map[string]string{
		"team.yaml": psAuditPolicy("pset-outage-team", ns, "team", "label team is required (v2)"),
		"tier.yaml": psAuditPolicy("pset-outage-tier", ns, "tier", "label tier is required"),
	})
	reg.Down()
	updatePolicySet(t, name, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Select = &policyhubv1.MemberSelector{ExcludeNames: []string{"nothing-by-this-name"}}
	})
	set := waitPolicySet(t, name, "SourceReady False, the clusters at version 1", func(s *setView) error {
		c := meta.FindStatusCondition(s.Status.Conditions, controllers.ConditionSourceReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != s.Generation {
			return fmt.Errorf("SourceReady %+v", c)
		}
		return setInForce(v1, "cluster-1", "cluster-2")(s)
	})
	c := meta.FindStatusCondition(set.Status.Conditions, controllers.ConditionSourceReady)
	if c.Reason != "ReadFailed" || !strings.Contains(c.Message, ref) || !strings.Contains(c.Message, "the clusters keep version "+v1) || set.Status.Source.LastError == "" {
		t.Errorf("SourceReady %+v, lastError %q: want ReadFailed naming the reference and the version kept", c, set.Status.Source.LastError)
	}
	if got := clusterPolicy(t, "cluster-1", "pset-outage-team").GetResourceVersion(); got != before {
		t.Errorf("the member was written while the source was down (resourceVersion %s, was %s)", got, before)
	}
	if clusterPolicy(t, "cluster-1", "pset-outage-tier") != nil {
		t.Error("a member of the version never read reached the cluster")
	}
	hub := directClient(t, testFleet.Hub.Config)
	eventually(t, 30*time.Second, 200*time.Millisecond, "a Warning Event about the source", func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(testContext(t), list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == "Warning" && e.Reason == "SourceReadFailed" {
				return nil
			}
		}
		return fmt.Errorf("no SourceReadFailed Event among %d", len(list.Items))
	})

	reg.Up()
	set = waitPolicySet(t, name, "version 2 in force once the registry is back", setInForce(v2, "cluster-1", "cluster-2"))
	if c := meta.FindStatusCondition(set.Status.Conditions, controllers.ConditionSourceReady); c == nil || c.Status != metav1.ConditionTrue || set.Status.Source.LastError != "" {
		t.Errorf("SourceReady %+v, lastError %q after the registry came back", c, set.Status.Source.LastError)
	}
	if clusterPolicy(t, "cluster-2", "pset-outage-tier") == nil {
		t.Error("version 2's new member did not reach cluster-2")
	}
}
