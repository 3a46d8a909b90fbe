package app

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestExceptionsFromADeclaration(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ex := func(ns, name, kind, target string, endsIn time.Duration) policyhubv1.FleetPolicyException {
		e := policyhubv1.FleetPolicyException{}
		e.Namespace, e.Name = ns, name
		e.Spec.Target = policyhubv1.ExceptionTarget{Kind: kind, Name: target}
		e.Spec.ExpiresAt = metav1.NewTime(now.Add(endsIn))
		e.Status.State = policyhubv1.ExceptionActive
		e.Status.InForce = 2
		return e
	}
	all := []policyhubv1.FleetPolicyException{
		ex("shop", "late", policyhubv1.KindFleetPolicy, "no-latest", 48*time.Hour),
		ex("shop", "soon", policyhubv1.KindFleetPolicy, "no-latest", time.Hour),
		ex("shop", "other-policy", policyhubv1.KindFleetPolicy, "other", time.Hour),
		ex("shop", "a-set", policyhubv1.KindPolicySet, "no-latest", time.Hour),
	}
	shown, more := exceptionsFrom(all, policyhubv1.KindFleetPolicy, "no-latest")
	if more != 0 || len(shown) != 2 || shown[0].Name != "soon" || shown[1].Name != "late" {
		t.Fatalf("shown %+v, more %d: want soon then late", shown, more)
	}
	var many []policyhubv1.FleetPolicyException
	for i := range maxStatusExceptions + 3 {
		many = append(many, ex("ns", fmt.Sprintf("e%02d", i), policyhubv1.KindPolicySet, "pss", time.Duration(i)*time.Hour))
	}
	shown, more = exceptionsFrom(many, policyhubv1.KindPolicySet, "pss")
	if len(shown) != maxStatusExceptions || more != 3 || shown[0].Name != "e00" {
		t.Fatalf("%d shown, %d more, first %s: want %d, 3, e00", len(shown), more, shown[0].Name, maxStatusExceptions)
	}
	report := &statusReport{Declarations: []declarationStatus{{Kind: kindPolicySet, Name: "pss", Exceptions: shown[:1], MoreExceptions: 12}}}
	var out bytes.Buffer
	printStatusExceptions(&out, report, now)
	for _, want := range []string{"exception ns/e00 from PolicySet/pss: in force in 2 clusters, 0 results exempted, ends 2026-11-26T12:00:00Z", "and 12 more exceptions from PolicySet/pss"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
