package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestExceptionMetrics(t *testing.T) {
	end := time.Unix(1_790_000_000, 0)
	exception := func(ns, name, state, policy string, exempted int64) *policyhubv1.FleetPolicyException {
		ex := &policyhubv1.FleetPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		ex.Spec.ExpiresAt = metav1.NewTime(end)
		ex.Status = policyhubv1.FleetPolicyExceptionStatus{State: state, Policy: policy, Exempted: exempted}
		return ex
	}
	reg := prometheus.NewRegistry()
	m := NewExceptions(reg)
	m.Set(exception("shop", "vendor", policyhubv1.ExceptionActive, "ClusterPolicy/no-latest", 3))
	m.Set(exception("platform", "hostpath", policyhubv1.ExceptionActive, "ClusterPolicy/no-latest", 0))
	m.Set(exception("shop", "pending", policyhubv1.ExceptionPending, "", 0))
	m.Set(exception("shop", "gone", policyhubv1.ExceptionActive, "ClusterPolicy/other", 0))
	m.Delete("shop", "gone")
	// A second Set replaces the exception's series (no duplicate after a change of state).
	m.Set(exception("shop", "vendor", policyhubv1.ExceptionActive, "ClusterPolicy/no-latest", 5))

	want := `
# HELP policyhub_exceptions_active Active FleetPolicyExceptions exempting from a policy (kind/name or kind/namespace/name).
# TYPE policyhub_exceptions_active gauge
policyhub_exceptions_active{policy="ClusterPolicy/no-latest"} 2
# HELP policyhub_exception_active 1 while a FleetPolicyException is approved and not ended (state Active), 0 otherwise.
# TYPE policyhub_exception_active gauge
policyhub_exception_active{name="hostpath",namespace="platform",policy="ClusterPolicy/no-latest"} 1
policyhub_exception_active{name="pending",namespace="shop",policy=""} 0
policyhub_exception_active{name="vendor",namespace="shop",policy="ClusterPolicy/no-latest"} 1
# HELP policyhub_exception_exempted_results Report results a FleetPolicyException turned into skip, summed over the clusters it is in, as their agents last reported.
# TYPE policyhub_exception_exempted_results gauge
policyhub_exception_exempted_results{name="hostpath",namespace="platform",policy="ClusterPolicy/no-latest"} 0
policyhub_exception_exempted_results{name="pending",namespace="shop",policy=""} 0
policyhub_exception_exempted_results{name="vendor",namespace="shop",policy="ClusterPolicy/no-latest"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"policyhub_exceptions_active", "policyhub_exception_active", "policyhub_exception_exempted_results"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m, "policyhub_exception_expiry_timestamp_seconds"); n != 3 {
		t.Errorf("%d expiry series, want 3", n)
	}
}
