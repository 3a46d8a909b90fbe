package evaluate

import (
	"strings"
	"testing"
	"time"

	"github.com/policyhub/policyhub/agent/dryruns"
)

// The deny checks per policy, from an exposition as the API server writes it, and their
// increase over the window.
func TestDenials(t *testing.T) {
	read := func(text string) map[dryruns.Key]float64 {
		t.Helper()
		family, err := dryruns.ParseFamily(strings.NewReader(text), RefusalMetric, 0)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := denials(family)
		return d
	}
	const head = "# HELP apiserver_validating_admission_policy_check_total [BETA] Validation admission policy check total.\n" +
		"# TYPE apiserver_validating_admission_policy_check_total counter\n"
	first := read(head +
		`apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="vap-team",policy_binding="vap-team"} 2` + "\n" +
		`apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="no_error",policy="vap-team",policy_binding="vap-team"} 7` + "\n" +
		`apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="Not A Name",policy_binding="x"} 1` + "\n" +
		"apiserver_request_total{code=\"200\"} 100\n")
	if len(first) != 1 || first[dryruns.Key{Name: "vap-team"}] != 2 {
		t.Fatalf("denials %v, want vap-team: 2", first)
	}
	second := read(head +
		`apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="vap-team",policy_binding="vap-team"} 5` + "\n" +
		`apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="compile_error",policy="vap-team",policy_binding="other"} 1` + "\n")
	var w dryruns.Window
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w.Observe(apiServer, t0, first) // the baseline: refusals before the agent's first read are of unknown age
	w.Observe(apiServer, t0.Add(time.Minute), second)
	if got := w.DryRuns(t0.Add(time.Minute))[dryruns.Key{Name: "vap-team"}]; got != 4 {
		t.Errorf("refused over the window: %d, want 4 (5+1 since the baseline's 2)", got)
	}
	if got := w.DryRuns(t0.Add(2 * time.Hour))[dryruns.Key{Name: "vap-team"}]; got != 0 {
		t.Errorf("refused over the window two hours later: %d, want 0", got)
	}
	if d := read("apiserver_request_total 1\n"); len(d) != 0 {
		t.Errorf("no metric: %v", d)
	}
}
