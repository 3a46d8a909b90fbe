package engine

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A tenant asking for the hub's sync Lease namespace is told it is never granted, not to ask a
// hub admin for a grant that would not give it.
func TestNotGrantedNamesTheSyncLeaseNamespace(t *testing.T) {
	for _, tc := range []struct {
		refused []string
		never   bool
	}{
		{[]string{"c1/team-b"}, false},
		{[]string{"c1/team-b", "c2/" + policyhubv1.SyncLeaseNamespace}, true},
	} {
		ready := metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionTrue}
		stalled := notGranted(&ready, "team-a", tc.refused)
		never := "namespace " + policyhubv1.SyncLeaseNamespace + " holds the hub's sync Lease in every cluster and is never granted"
		if stalled == nil || ready.Reason != ReasonNotGranted || strings.Contains(stalled.Message, never) != tc.never ||
			!strings.Contains(stalled.Message, "TenantGrant") {
			t.Errorf("refused %v: Ready %+v, Stalled %+v; want NotGranted, saying %q: %v", tc.refused, ready, stalled, never, tc.never)
		}
	}
}
