package e2e

import (
	"encoding/json"
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
// read, SourceReady turns False saying why (and a Warning Event says it once), and the set is not
// Ready (SourceNotReady), as Flux's sources are while a fetch fails. Where users read it — kubectl
// get pset (-o wide), kubectl policyhub status pset/NAME — the source is shown failing, with the
// version the clusters keep, not "Synced" alone. Once the registry is back, the version its tag
// names now reaches the clusters and the set is Ready again.
func TestPolicySetKeepsTheLastGoodVersionWhileItsSourceIsDown(t *testing.T) {
	inParallel(t)
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
		return setKeptWhileSourceDown(v1, "cluster-1", "cluster-2")(s)
	})
	sourceDownShown(t, name, ref, v1)
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
	hub := directClient(t, fleetOf(t).Hub.Config)
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
	if cols := printedColumns(t, "policysets", name); cols["Ready"] != "True" || cols["Source"] != "Read" || cols["Phase"] != "Synced" {
		t.Errorf("kubectl get pset once the registry is back: %v, want Ready True, Source Read, Phase Synced", cols)
	}
}

// sourceDownShown checks that kubectl get pset (the apiserver's Table, wide columns included) and
// kubectl policyhub status say that the set's source (ref) cannot be read, and that the clusters
// keep version kept.
func sourceDownShown(t *testing.T, name, ref, kept string) {
	t.Helper()
	cols := printedColumns(t, "policysets", name)
	for col, want := range map[string]string{"Ready": "False", "Phase": controllers.ReasonSourceNotReady, "Source": "ReadFailed", "Revision": ref, "Synced": "2"} {
		if cols[col] != want {
			t.Errorf("kubectl get pset: column %s is %q, want %q (all: %v)", col, cols[col], want, cols)
		}
	}
	if !strings.Contains(cols["Status"], "the source cannot be read") || !strings.Contains(cols["Status"], "the clusters keep version "+kept) {
		t.Errorf("kubectl get pset -o wide: Status %q does not say the source fails and the version kept (%s)", cols["Status"], kept)
	}
	if !strings.Contains(cols["Source-Status"], ref) {
		t.Errorf("kubectl get pset -o wide: Source-Status %q does not name the source %s", cols["Source-Status"], ref)
	}

	_, out, errOut := cliReadRun(t, "status", "pset/"+name)
	var row string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "PolicySet/"+name+" ") && strings.Contains(line, " <all> ") {
			row = line
		}
	}
	if !strings.Contains(row, controllers.ReasonSourceNotReady) || !strings.Contains(row, "the clusters keep version "+kept) {
		t.Errorf("kubectl policyhub status pset/%s does not say the source fails and the version kept:\n%s%s", name, out, errOut)
	}
	_, out, errOut = cliReadRun(t, "status", "pset/"+name, "-o", "json")
	var report struct {
		Declarations []struct {
			Ready  string `json:"ready"`
			Source struct {
				Ready, Reason, Message string
			} `json:"source"`
		} `json:"declarations"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || len(report.Declarations) != 1 {
		t.Fatalf("status -o json: %v\n%s%s", err, out, errOut)
	}
	if d := report.Declarations[0]; d.Ready != "False" || d.Source.Ready != "False" || d.Source.Reason != "ReadFailed" || !strings.Contains(d.Source.Message, "the clusters keep version "+kept) {
		t.Errorf("status -o json: %+v, want ready False and source False, ReadFailed, naming version %s", d, kept)
	}
}
