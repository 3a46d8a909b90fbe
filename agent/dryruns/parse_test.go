package dryruns

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// series is one line of kyverno_policy_results_total as Kyverno 1.19.1 exposes it (read from
// the local fleet's admission controller), with the labels that vary.
func seriesLine(dryRun, policyNS, policy, rule, result, mode, cause string, v float64) string {
	return fmt.Sprintf(`kyverno_policy_results_total{dry_run=%q,otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version="",policy_background_mode="true",policy_name=%q,policy_namespace=%q,policy_type="cluster",policy_validation_mode=%q,resource_kind="Deployment",resource_namespace="shop",resource_request_operation="create",rule_execution_cause=%q,rule_name=%q,rule_result=%q,rule_type="validate"} %g`,
		dryRun, policy, policyNS, mode, cause, rule, result, v)
}

const header = "# HELP kyverno_policy_results_total can be used to track the results\n# TYPE kyverno_policy_results_total counter\n"

func TestParse(t *testing.T) {
	other := "# HELP kyverno_admission_requests_total x\n# TYPE kyverno_admission_requests_total counter\nkyverno_admission_requests_total{a=\"b\"} 7\n"
	tests := []struct {
		name       string
		text       string
		want       map[Key]float64
		present    bool
		unlabelled int
		invalid    int
		wantErr    string
	}{
		{name: "no metric yet", text: other},
		{
			name: "dry-run refusals summed per rule over the other labels; real ones, audit, background, passes left out",
			text: other + header + strings.Join([]string{
				seriesLine("true", "-", "team", "need-team", "fail", "enforce", "admission_request", 2),
				strings.Replace(seriesLine("true", "-", "team", "need-team", "fail", "enforce", "admission_request", 3), `resource_namespace="shop"`, `resource_namespace="web"`, 1),
				seriesLine("false", "-", "team", "need-team", "fail", "enforce", "admission_request", 40),
				seriesLine("true", "-", "team", "need-team", "pass", "enforce", "admission_request", 40),
				seriesLine("true", "-", "team", "need-team", "fail", "audit", "admission_request", 40),
				seriesLine("true", "-", "team", "need-team", "fail", "enforce", "background_scan", 40),
				seriesLine("true", "shop", "limits", "cpu", "fail", "enforce", "admission_request", 1),
			}, "\n") + "\n",
			present: true,
			want:    map[Key]float64{{Name: "team", Rule: "need-team"}: 5, {Namespace: "shop", Name: "limits", Rule: "cpu"}: 1},
		},
		{
			name:       "no dry_run label: cannot tell",
			text:       header + strings.Replace(seriesLine("true", "-", "team", "r", "fail", "enforce", "admission_request", 2), `dry_run="true",`, "", 1) + "\n",
			present:    true,
			unlabelled: 1,
		},
		{
			name: "hostile names and values skipped",
			text: header + strings.Join([]string{
				seriesLine("true", "-", "Not_A_Name", "r", "fail", "enforce", "admission_request", 1),
				seriesLine("true", "bad/ns", "p", "r", "fail", "enforce", "admission_request", 1),
				seriesLine("true", "-", "p", strings.Repeat("r", 64), "fail", "enforce", "admission_request", 1),
				seriesLine("true", "-", "p", "", "fail", "enforce", "admission_request", 1),
				seriesLine("true", "-", "p", "r\n", "fail", "enforce", "admission_request", 1),
				strings.Replace(seriesLine("true", "-", "p", "r", "fail", "enforce", "admission_request", 1), "} 1", "} NaN", 1),
				seriesLine("true", "-", "p", "r", "fail", "enforce", "admission_request", -1),
				seriesLine("true", "-", "p", "r", "fail", "enforce", "admission_request", 1e300),
				seriesLine("true", "-", "p", "ok", "fail", "enforce", "admission_request", 4),
			}, "\n") + "\n",
			present: true,
			invalid: 8,
			want:    map[Key]float64{{Name: "p", Rule: "ok"}: 4},
		},
		{name: "a line longer than 64 KiB", text: header + "kyverno_policy_results_total{a=\"" + strings.Repeat("x", 70000) + "\"} 1\n", wantErr: "token too long"},
		{name: "broken text of the metric", text: header + "kyverno_policy_results_total{dry_run=\"true\" 1\n", wantErr: "parse kyverno_policy_results_total"},
		{name: "broken text of another metric is not read", text: "other_metric{{{ garbage\n" + header},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader(tt.text), 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(r.DryRuns) != fmt.Sprint(orEmpty(tt.want)) || r.Unlabelled != tt.unlabelled || r.Invalid != tt.invalid {
				t.Errorf("got %v unlabelled %d invalid %d; want %v unlabelled %d invalid %d", r.DryRuns, r.Unlabelled, r.Invalid, tt.want, tt.unlabelled, tt.invalid)
			}
			if tt.present && !r.Present {
				t.Errorf("the metric is not seen present")
			}
		})
	}
}

func orEmpty(m map[Key]float64) map[Key]float64 {
	if m == nil {
		return map[Key]float64{}
	}
	return m
}

// More series than allowed is an error, before they are parsed.
func TestParseBoundsSeries(t *testing.T) {
	var b strings.Builder
	b.WriteString(header)
	for i := range 11 {
		b.WriteString(seriesLine("true", "-", fmt.Sprintf("p%d", i), "r", "fail", "enforce", "admission_request", 1) + "\n")
	}
	if _, err := Parse(strings.NewReader(b.String()), 10); !errors.Is(err, ErrTooManySeries) {
		t.Fatalf("error %v, want ErrTooManySeries", err)
	}
	if r, err := Parse(strings.NewReader(b.String()), 11); err != nil || len(r.DryRuns) != 11 {
		t.Fatalf("at the bound: %v, %d series", err, len(r.DryRuns))
	}
}

// Parse never panics, whatever it reads.
func FuzzParse(f *testing.F) {
	f.Add(header + seriesLine("true", "-", "team", "need-team", "fail", "enforce", "admission_request", 2) + "\n")
	f.Add("kyverno_policy_results_total 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(strings.NewReader(text), 100)
		if err != nil {
			return
		}
		for k, v := range r.DryRuns {
			if v < 0 || k.Name == "" || k.Rule == "" {
				t.Fatalf("kept %v = %v", k, v)
			}
		}
	})
}
