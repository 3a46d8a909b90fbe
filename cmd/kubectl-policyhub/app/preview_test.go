package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

var previewNow = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func previewAgo(d time.Duration) *metav1.Time { return &metav1.Time{Time: previewNow.Add(-d)} }

// previewCandidateTemplate is a candidate as spec.preview.template holds it.
func previewCandidateTemplate(name string) *policyhubv1.PolicyTemplate {
	return &policyhubv1.PolicyTemplate{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy",
		Metadata: policyhubv1.TemplateMetadata{Name: name},
		Spec:     &runtime.RawExtension{Raw: []byte(`{"validations":[{"expression":"has(object.metadata.labels.team)"}]}`)}}
}

func mustRevision(t *testing.T, tmpl policyhubv1.PolicyTemplate) string {
	t.Helper()
	rev, err := render.TemplateRevision(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// previewFleetPolicy is FleetPolicy require-team previewing candidate require-team-v2, the hub up
// to date with it, and status.preview as given (its revision set to the candidate's).
func previewFleetPolicy(t *testing.T, p *policyhubv1.PreviewStatus) *policyhubv1.FleetPolicy {
	t.Helper()
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "require-team", Generation: 4}}
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Spec: &runtime.RawExtension{Raw: []byte(`{"rules":[]}`)}}
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: previewCandidateTemplate("require-team-v2")}
	fp.Status.ObservedGeneration = 4
	if p != nil {
		p.Revision = mustRevision(t, *fp.Spec.Preview.Template)
		fp.Status.Preview = p
	}
	return fp
}

func refOf(ns, kind, name string) policyhubv1.ResourceRef {
	return policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: kind, Namespace: ns, Name: name}
}

// Which preview a FleetPolicy runs, and the message when it runs none.
func TestPreviewTargetOf(t *testing.T) {
	base := func() *policyhubv1.FleetPolicy {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fp", Generation: 3}}
		fp.Spec.Template = *previewCandidateTemplate("live")
		return fp
	}
	gate := &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}}, PreviewGate: &policyhubv1.PreviewGate{}}
	for _, tc := range []struct {
		name          string
		change        func(*policyhubv1.FleetPolicy)
		candidate     string
		previewsSpec  bool
		wantErrSubstr string
	}{
		{name: "nothing", change: func(*policyhubv1.FleetPolicy) {},
			wantErrSubstr: "FleetPolicy fp has no preview running: start one with `kubectl policyhub preview fp -f CANDIDATE`"},
		{name: "a candidate", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: previewCandidateTemplate("v2")}
		}, candidate: candidatePreviewTemplate},
		{name: "held back", change: func(fp *policyhubv1.FleetPolicy) { fp.Spec.Preview = &policyhubv1.PreviewSpec{} },
			candidate: candidateHeldBack, previewsSpec: true},
		{name: "rollout gate previewing", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Spec.Rollout = gate
			fp.Status.Preview = &policyhubv1.PreviewStatus{}
		}, candidate: candidateRolloutGate, previewsSpec: true},
		{name: "rollout gate, nothing previewed", change: func(fp *policyhubv1.FleetPolicy) { fp.Spec.Rollout = gate },
			wantErrSubstr: "FleetPolicy fp has no preview running: its rollout previews each new version of spec.template before its waves start (spec.rollout.previewGate)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := base()
			tc.change(fp)
			target, err := previewTargetOf(fp)
			if tc.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := previewCandidateTemplate("v2")
			if tc.previewsSpec {
				want = &fp.Spec.Template
			}
			if target.candidate != tc.candidate || target.revision != mustRevision(t, *want) || target.generation != 3 {
				t.Errorf("target %+v, want candidate %q at revision %s", target, tc.candidate, mustRevision(t, *want))
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const candidateYAML = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team-v2
  labels: {tier: baseline}
  annotations:
    policies.kyverno.io/title: Require a team
    kubectl.kubernetes.io/last-applied-configuration: '{"big":"blob"}'
  uid: 1234
  resourceVersion: "99"
spec:
  background: true
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate: {failureAction: Enforce, pattern: {metadata: {labels: {team: "?*"}}}}
status: {ready: true}
`

// The candidate: one policy of a kind a shadow can be made of, taken whole into the template (its
// identity on a cluster and kubectl's last-applied copy left out); anything else is refused
// saying what was found.
func TestReadCandidate(t *testing.T) {
	dir := t.TempDir()
	one := writeFile(t, dir, "one.yaml", candidateYAML)
	tmpl, err := readCandidate(one, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.APIVersion != "kyverno.io/v1" || tmpl.Kind != "ClusterPolicy" || tmpl.Metadata.Name != "require-team-v2" || tmpl.Metadata.Namespace != "" ||
		tmpl.Metadata.Labels["tier"] != "baseline" || len(tmpl.Metadata.Annotations) != 1 || tmpl.Metadata.Annotations["policies.kyverno.io/title"] != "Require a team" {
		t.Errorf("template %+v", tmpl)
	}
	if want := `{"background":true,"rules":[{"match":{"any":[{"resources":{"kinds":["Deployment"]}}]},"name":"team","validate":{"failureAction":"Enforce","pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`; tmpl.Spec == nil || string(tmpl.Spec.Raw) != want {
		t.Errorf("spec %s, want %s", tmpl.Spec.Raw, want)
	}

	// From stdin, a namespaced CEL policy, as JSON.
	tmpl, err = readCandidate("-", strings.NewReader(`{"apiVersion":"policies.kyverno.io/v1","kind":"NamespacedValidatingPolicy","metadata":{"name":"n","namespace":"shop"},"spec":{"validations":[]}}`))
	if err != nil || tmpl.Kind != "NamespacedValidatingPolicy" || tmpl.Metadata.Namespace != "shop" || tmpl.Metadata.Annotations != nil {
		t.Errorf("stdin: %+v %v", tmpl, err)
	}

	several := t.TempDir()
	writeFile(t, several, "a.yaml", candidateYAML)
	writeFile(t, several, "b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: shop}\n")
	for _, tc := range []struct {
		name, file, stdin, want string
	}{
		{name: "empty file", file: writeFile(t, dir, "empty.yaml", "---\n# nothing\n"),
			want: "-f " + filepath.Join(dir, "empty.yaml") + ": no object found: give one Kyverno policy to preview (a kyverno.io ClusterPolicy or Policy, or a policies.kyverno.io ValidatingPolicy or NamespacedValidatingPolicy)"},
		{name: "empty stdin", file: "-", want: "-f -: no object found"},
		{name: "two documents", file: writeFile(t, dir, "two.yaml", candidateYAML+"---\n"+strings.Replace(candidateYAML, "require-team-v2", "other", 1)),
			want: "-f " + filepath.Join(dir, "two.yaml") + " holds 2 objects (kyverno.io/v1 ClusterPolicy require-team-v2, kyverno.io/v1 ClusterPolicy other): a preview takes one Kyverno policy"},
		{name: "a directory of two", file: several,
			want: "holds 2 objects (kyverno.io/v1 ClusterPolicy require-team-v2, v1 ConfigMap shop/cm)"},
		{name: "a long list", file: "-", stdin: `{"apiVersion":"v1","kind":"List","items":[` + strings.Repeat(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}},`, 6) + `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}]}`,
			want: "-f - holds 7 objects (v1 ConfigMap c, v1 ConfigMap c, v1 ConfigMap c, v1 ConfigMap c, v1 ConfigMap c, and 2 more)"},
		{name: "not a policy", file: writeFile(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"),
			want: "v1 ConfigMap cm cannot be previewed: a preview's candidate is a kyverno.io ClusterPolicy or Policy, or a policies.kyverno.io ValidatingPolicy or NamespacedValidatingPolicy"},
		{name: "a kyverno kind no shadow is made of", file: writeFile(t, dir, "cleanup.yaml", "apiVersion: kyverno.io/v2\nkind: ClusterCleanupPolicy\nmetadata: {name: c}\nspec: {}\n"),
			want: "kyverno.io/v2 ClusterCleanupPolicy c cannot be previewed"},
		{name: "a mutating CEL policy", file: writeFile(t, dir, "mp.yaml", "apiVersion: policies.kyverno.io/v1\nkind: MutatingPolicy\nmetadata: {name: m}\nspec: {}\n"),
			want: "policies.kyverno.io/v1 MutatingPolicy m cannot be previewed"},
		{name: "a ValidatingPolicy of another group", file: writeFile(t, dir, "vap.yaml", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingPolicy\nmetadata: {name: v}\nspec: {}\n"),
			want: "admissionregistration.k8s.io/v1 ValidatingPolicy v cannot be previewed"},
		{name: "no spec", file: writeFile(t, dir, "nospec.yaml", "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\n"),
			want: "kyverno.io/v1 ClusterPolicy x has no spec"},
		{name: "no such file", file: filepath.Join(dir, "missing.yaml"), want: "-f " + filepath.Join(dir, "missing.yaml") + ": stat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCandidate(tc.file, strings.NewReader(tc.stdin))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// Argument and flag mistakes are usage errors (exit 2, nothing on stdout), found before the hub
// is asked anything and before any file is read.
func TestPreviewUsage(t *testing.T) {
	dir := t.TempDir()
	cm := writeFile(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"preview"}, "preview takes one FLEETPOLICY (got 0 arguments) (see --help)"},
		{[]string{"preview", "a", "b"}, "preview takes one FLEETPOLICY (got 2 arguments)"},
		{[]string{"preview", "ap/shop"}, `"ap/shop": previews are FleetPolicy's (spec.preview), not ApplicationPolicy's`},
		{[]string{"preview", "x", "-f", filepath.Join(dir, "missing.yaml"), "--end"}, "-f and --end are exclusive: -f starts (or replaces) a preview, --end ends it (see --help)"},
		{[]string{"preview", "x", "--end", "--wait"}, "--wait waits for a preview's results: it does not go with --end"},
		{[]string{"preview", "x", "--end", "--max-would-fail", "0"}, "--max-would-fail judges a preview's results: it does not go with --end"},
		{[]string{"preview", "x", "--timeout", "1m"}, "--timeout is how long --wait waits: add --wait"},
		{[]string{"preview", "x", "--wait", "--timeout", "0s"}, "--timeout 0s: give a positive duration"},
		{[]string{"preview", "x", "--max-would-fail", "-1"}, "--max-would-fail -1: give 0 or more"},
		{[]string{"preview", "x", "-f", cm, "--max-would-fail", "0"}, "--max-would-fail judges a complete preview, and a new candidate's results come later: add --wait"},
		// The candidate is refused before the hub is asked (there is no hub here).
		{[]string{"preview", "x", "-f", cm}, "v1 ConfigMap cm cannot be previewed"},
		{[]string{"preview", "x", "-o", "xml"}, `-o "xml": choose table, json or yaml`},
	} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"--kubeconfig", filepath.Join(dir, "no-kubeconfig")}, tc.args...), Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		if code != ExitError || out.Len() != 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if code := Run(t.Context(), []string{"preview", "--help"}, Streams{Out: &out, ErrOut: &out}); code != ExitOK ||
		!strings.Contains(out.String(), "Examples:\n  ") || !strings.Contains(out.String(), "-o json|yaml prints {") || !strings.Contains(out.String(), "--max-would-fail int") {
		t.Errorf("preview --help: exit %d\n%s", code, out.String())
	}
}

// --max-would-fail judges a complete preview of the current candidate: exit 1 (errFindings) over
// it, with a message; an error (exit 2) when it cannot be judged yet.
func TestPreviewVerdict(t *testing.T) {
	complete := func(wouldFail int64) *previewReport {
		return &previewReport{FleetPolicy: "fp", CandidateRevision: "r1", Revision: "r1", UpToDate: true, Complete: true, Clusters: 3, Reported: 3, WouldFail: wouldFail, NewlyFailing: 1}
	}
	ptr := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name     string
		report   *previewReport
		max      *int64
		findings bool
		err      string
		msg      string
	}{
		{name: "no gate asked", report: complete(100)},
		{name: "no gate asked, not complete", report: &previewReport{Revision: "r1", UpToDate: true}},
		{name: "at the gate", report: complete(3), max: ptr(3)},
		{name: "zero allowed, none", report: complete(0), max: ptr(0)},
		{name: "over the gate", report: complete(4), max: ptr(3), findings: true,
			msg: "preview gate failed: the candidate (revision r1) of FleetPolicy fp would fail 4 resources over 3 clusters (1 newly failing), more than --max-would-fail 3"},
		{name: "not complete", report: &previewReport{FleetPolicy: "fp", CandidateRevision: "r1", Revision: "r1", UpToDate: true, Clusters: 3, Reported: 2, WouldFail: 9}, max: ptr(3),
			err: "--max-would-fail: the preview of FleetPolicy fp is not complete (2 of 3 clusters reported): add --wait to wait for it"},
		{name: "results of an older candidate", report: &previewReport{FleetPolicy: "fp", CandidateRevision: "r2", Revision: "r1", Complete: true}, max: ptr(3),
			err: "is not started for revision r2 yet"},
		{name: "not started", report: &previewReport{FleetPolicy: "fp", CandidateRevision: "r2"}, max: ptr(3), err: "is not started for revision r2 yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := previewVerdict(tc.report, tc.max)
			switch {
			case tc.findings:
				if !errors.Is(err, errFindings) || msg != tc.msg {
					t.Errorf("got %q, %v; want findings and %q", msg, err, tc.msg)
				}
			case tc.err != "":
				if err == nil || errors.Is(err, errFindings) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %v; want an error (not findings) with %q", err, tc.err)
				}
			case err != nil || msg != "":
				t.Errorf("got %q, %v; want no verdict", msg, err)
			}
		})
	}
}

// What a waiting command makes of the FleetPolicy each time it reads it.
func TestPreviewProgress(t *testing.T) {
	start := previewFleetPolicy(t, nil)
	target, err := previewTargetOf(start)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*policyhubv1.FleetPolicy)
		line    string
		done    bool
		movedOn bool
		err     string
	}{
		{name: "the hub has not processed the spec", change: func(fp *policyhubv1.FleetPolicy) { fp.Status.ObservedGeneration = 3 },
			line: "FleetPolicy require-team: waiting for the hub to process generation 4 (it has processed 3)"},
		{name: "processed, the preview not started", change: func(*policyhubv1.FleetPolicy) {},
			line: "FleetPolicy require-team: waiting for the hub to start the preview of revision " + target.revision},
		{name: "an older candidate's results", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: "old", Clusters: 2, Reported: 2, CompletedAt: previewAgo(0)}
		}, line: "FleetPolicy require-team: waiting for the hub to start the preview of revision " + target.revision},
		{name: "reporting", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: target.revision, Clusters: 3, Reported: 1}
		}, line: "FleetPolicy require-team: reported 1 of 3 clusters"},
		{name: "complete", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: target.revision, Clusters: 3, Reported: 3, CompletedAt: previewAgo(0)}
		}, line: "FleetPolicy require-team: reported 3 of 3 clusters", done: true},
		{name: "stalled", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Status.Conditions = []metav1.Condition{{Type: policyhubv1.ConditionStalled, Status: metav1.ConditionTrue, ObservedGeneration: 4, Reason: "InvalidPreview", Message: "only validate rules can be previewed"}}
		}, err: "the hub cannot run the preview of FleetPolicy require-team: InvalidPreview: only validate rules can be previewed"},
		{name: "stalled on an older generation: not this one's", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Status.Conditions = []metav1.Condition{{Type: policyhubv1.ConditionStalled, Status: metav1.ConditionTrue, ObservedGeneration: 3, Reason: "InvalidPreview"}}
		}, line: "FleetPolicy require-team: waiting for the hub to start the preview of revision " + target.revision},
		{name: "candidate replaced", change: func(fp *policyhubv1.FleetPolicy) {
			fp.Spec.Preview.Template = previewCandidateTemplate("someone-else")
		}, err: "the candidate of FleetPolicy require-team was replaced meanwhile: spec.preview.template is now revision "},
		{name: "preview ended", change: func(fp *policyhubv1.FleetPolicy) { fp.Spec.Preview = nil },
			err: "the preview of FleetPolicy require-team ended meanwhile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := start.DeepCopy()
			tc.change(fp)
			got := previewProgress(fp, target)
			if got.line != tc.line || got.done != tc.done || got.movedOn != tc.movedOn {
				t.Errorf("got %+v; want line %q, done %v, movedOn %v", got, tc.line, tc.done, tc.movedOn)
			}
			if (tc.err == "") != (got.err == nil) || (got.err != nil && !strings.Contains(got.err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", got.err, tc.err)
			}
		})
	}

	// A rollout's preview is gone once it passed the gate and its waves started.
	gated := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 2}}
	gated.Spec.Template = *previewCandidateTemplate("")
	gated.Spec.Rollout = &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}}, PreviewGate: &policyhubv1.PreviewGate{MaxWouldFail: ptrTo(int64(1))}}
	gated.Status.ObservedGeneration = 2
	gated.Status.Preview = &policyhubv1.PreviewStatus{Clusters: 1}
	gateTarget, err := previewTargetOf(gated)
	if err != nil {
		t.Fatal(err)
	}
	gated.Status.Preview = nil
	gated.Status.Rollout = &policyhubv1.RolloutStatus{Revision: gateTarget.revision, CurrentWave: "all"}
	if got := previewProgress(gated, gateTarget); !got.movedOn || got.err != nil || !strings.Contains(got.line, "passed spec.rollout.previewGate") {
		t.Errorf("rollout moved on: %+v", got)
	}
	gated.Status.Rollout.Revision = "another"
	if got := previewProgress(gated, gateTarget); got.movedOn || got.err == nil {
		t.Errorf("another version's rollout taken for this preview's: %+v", got)
	}
}

// A timeout says how far the preview got.
func TestPreviewTimeout(t *testing.T) {
	fp := previewFleetPolicy(t, nil)
	target, err := previewTargetOf(fp)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "timed out after 5m0s waiting for the preview of FleetPolicy require-team (revision " + target.revision + "): "
	fp.Status.ObservedGeneration = 3
	if err := previewTimeout(fp, target, 5*time.Minute); err == nil || err.Error() != prefix+"the hub has not processed generation 4 yet (status.observedGeneration 3): is the hub running?" {
		t.Errorf("not processed: %v", err)
	}
	fp.Status.ObservedGeneration = 4
	if err := previewTimeout(fp, target, 5*time.Minute); err == nil || err.Error() != prefix+"the hub has not started it yet" {
		t.Errorf("not started: %v", err)
	}
	fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: target.revision, Clusters: 5, Reported: 3}
	if err := previewTimeout(fp, target, 5*time.Minute); err == nil || err.Error() != prefix+"3 of 5 clusters reported" {
		t.Errorf("reporting: %v", err)
	}
}

// The write: a merge patch conditional on the resourceVersion read, that sets the new candidate
// whole (fields of the one it replaces removed), and removes spec.preview for --end.
func TestPreviewPatches(t *testing.T) {
	fp := previewFleetPolicy(t, nil)
	fp.ResourceVersion = "41"
	fp.Spec.Preview.Template.Metadata.Labels = map[string]string{"old": "x"}
	next := previewCandidateTemplate("v3")
	next.Spec = &runtime.RawExtension{Raw: []byte(`{"validations":[{"expression":"true"}],"evaluation":{"background":{"enabled":true}}}`)}
	patched := withPreview(fp, *next)
	if fp.Spec.Preview.Template.Metadata.Name != "require-team-v2" {
		t.Fatal("withPreview changed the FleetPolicy it was given")
	}
	data, err := client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{}).Data(patched)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Spec map[string]map[string]map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	tmpl := patch.Spec["preview"]["template"]
	md, _ := tmpl["metadata"].(map[string]any)
	if patch.Metadata.ResourceVersion != "41" || md["name"] != "v3" || md["labels"] != nil || tmpl["spec"] == nil || len(patch.Spec) != 1 {
		t.Errorf("patch %s: want resourceVersion 41, the new name, the old labels removed (null), the new spec, nothing but spec.preview", data)
	}
	if _, ok := md["labels"]; !ok {
		t.Errorf("patch %s does not remove the replaced candidate's labels", data)
	}

	ended := fp.DeepCopy()
	ended.Spec.Preview = nil
	data, err = client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{}).Data(ended)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"resourceVersion":"41"},"spec":{"preview":null}}`; string(data) != want {
		t.Errorf("--end patch %s, want %s", data, want)
	}
}

// What start and --end say.
func TestPreviewMessages(t *testing.T) {
	for _, tc := range []struct {
		got  fmt.Stringer
		want string
	}{
		{&previewStarted{FleetPolicy: "fp", Candidate: "ValidatingPolicy/v2", Revision: "r2", Shadow: "policyhub-shadow-v2", Changed: true},
			"fleetpolicy/fp: previewing ValidatingPolicy/v2 (revision r2, shadow policyhub-shadow-v2)"},
		{&previewStarted{FleetPolicy: "fp", Candidate: "ValidatingPolicy/v2", Revision: "r2", Shadow: "s", Changed: true, Replaced: "r1"},
			"fleetpolicy/fp: previewing ValidatingPolicy/v2 (revision r2, shadow s), replacing revision r1"},
		{&previewStarted{FleetPolicy: "fp", Candidate: "ValidatingPolicy/v2", Revision: "r2", Shadow: "s"},
			"fleetpolicy/fp: previewing ValidatingPolicy/v2 (revision r2, shadow s) (unchanged)"},
		{&previewEnded{FleetPolicy: "fp", Ended: true}, "fleetpolicy/fp: preview ended (spec.preview removed): the hub removes the shadows"},
		{&previewEnded{FleetPolicy: "fp", Ended: true, HeldBack: true},
			"fleetpolicy/fp: preview ended (spec.preview removed): the hub removes the shadows, and spec.template, held back during the preview, now ships to the clusters"},
		{&previewEnded{FleetPolicy: "fp"}, "fleetpolicy/fp has no spec.preview: nothing to end"},
		{&previewEnded{FleetPolicy: "fp", Gate: true}, "fleetpolicy/fp has no spec.preview: nothing to end (its rollout previews each new version itself, spec.rollout.previewGate)"},
	} {
		if got := tc.got.String(); got != tc.want {
			t.Errorf("got %q\nwant %q", got, tc.want)
		}
	}
	if got, want := (&previewStarted{FleetPolicy: "fp"}).nextStep(), "`kubectl policyhub preview fp` shows them, with --wait once every cluster reported."; !strings.HasSuffix(got, want) {
		t.Errorf("next step %q, want it to end with %q", got, want)
	}
}

// previewHub is a hub that answers reads only: a FleetPolicy that changes with each read (the
// last one stays), and its ClusterStatusSlices.
type previewHub struct {
	reads  []*policyhubv1.FleetPolicy
	slices []policyhubv1.ClusterStatusSlice
	got    int
}

func (h *previewHub) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	fp := h.reads[min(h.got, len(h.reads)-1)]
	h.got++
	if key.Name != fp.Name {
		return apierrors.NewNotFound(schema.GroupResource{Group: policyhubv1.GroupVersion.Group, Resource: "fleetpolicies"}, key.Name)
	}
	fp.DeepCopyInto(obj.(*policyhubv1.FleetPolicy))
	return nil
}

func (h *previewHub) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*policyhubv1.ClusterStatusSliceList).Items = h.slices
	return nil
}

// sliceOf is a ClusterStatusSlice of fp holding clusters.
func sliceOf(fp *policyhubv1.FleetPolicy, clusters ...policyhubv1.ClusterStatus) policyhubv1.ClusterStatusSlice {
	s := policyhubv1.ClusterStatusSlice{Declaration: policyhubv1.DeclarationRef{Kind: kindFleetPolicy, Name: fp.Name, UID: string(fp.UID)}, Clusters: clusters}
	s.Name = "fleetpolicy-" + string(fp.UID) + "-0"
	yes := true
	s.OwnerReferences = []metav1.OwnerReference{{Kind: kindFleetPolicy, Name: fp.Name, UID: fp.UID, Controller: &yes}}
	return s
}

// --wait prints a progress line each time the count of clusters that reported changes, then the
// report; --max-would-fail then decides the exit; a timeout prints how far the preview got and
// says so.
func TestPreviewWait(t *testing.T) {
	defer func(d time.Duration) { previewPoll = d }(previewPoll)
	previewPoll = time.Millisecond
	at := func(observed int64, p *policyhubv1.PreviewStatus) *policyhubv1.FleetPolicy {
		fp := previewFleetPolicy(t, p)
		fp.UID = "u1"
		fp.Status.ObservedGeneration = observed
		return fp
	}
	st := func(reported int32, complete bool) *policyhubv1.PreviewStatus {
		p := &policyhubv1.PreviewStatus{Shadow: "policyhub-shadow-require-team-v2", Clusters: 2, Reported: reported, WouldFail: 3 * int64(reported), Resources: 10}
		if complete {
			p.CompletedAt = previewAgo(0)
		}
		return p
	}
	first := at(3, nil)
	target, err := previewTargetOf(first)
	if err != nil {
		t.Fatal(err)
	}
	clusters := []policyhubv1.ClusterStatus{
		{Name: "b", Preview: &policyhubv1.ClusterPreview{Reported: true, WouldFail: 3}},
		{Name: "a", Preview: &policyhubv1.ClusterPreview{Reported: true, WouldFail: 3, NewlyFailing: 1}},
	}
	ptr := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name      string
		reads     []*policyhubv1.FleetPolicy
		max       *int64
		timeout   time.Duration
		findings  bool
		errSubstr string
		progress  string
		table     bool
	}{
		{name: "complete", reads: []*policyhubv1.FleetPolicy{first, at(4, nil), at(4, st(0, false)), at(4, st(1, false)), at(4, st(1, false)), at(4, st(2, true))},
			progress: "FleetPolicy require-team: waiting for the hub to process generation 4 (it has processed 3)\n" +
				"FleetPolicy require-team: waiting for the hub to start the preview of revision " + target.revision + "\n" +
				"FleetPolicy require-team: reported 0 of 2 clusters\n" +
				"FleetPolicy require-team: reported 1 of 2 clusters\n" +
				"FleetPolicy require-team: reported 2 of 2 clusters\n",
			table: true},
		{name: "complete, within --max-would-fail", reads: []*policyhubv1.FleetPolicy{at(4, st(2, true))}, max: ptr(6),
			progress: "FleetPolicy require-team: reported 2 of 2 clusters\n", table: true},
		{name: "complete, over --max-would-fail", reads: []*policyhubv1.FleetPolicy{at(4, st(2, true))}, max: ptr(5), findings: true,
			progress: "FleetPolicy require-team: reported 2 of 2 clusters\npreview gate failed: the candidate (revision " + target.revision +
				") of FleetPolicy require-team would fail 6 resources over 2 clusters (0 newly failing), more than --max-would-fail 5\n", table: true},
		{name: "timeout", reads: []*policyhubv1.FleetPolicy{at(4, st(1, false))}, max: ptr(100), timeout: 30 * time.Millisecond,
			errSubstr: "timed out after 30ms waiting for the preview of FleetPolicy require-team (revision " + target.revision + "): 1 of 2 clusters reported",
			progress:  "FleetPolicy require-team: reported 1 of 2 clusters\n", table: true},
		{name: "deleted meanwhile", reads: []*policyhubv1.FleetPolicy{at(4, st(1, false)), {ObjectMeta: metav1.ObjectMeta{Name: "other"}}},
			errSubstr: "FleetPolicy require-team not found", progress: "FleetPolicy require-team: reported 1 of 2 clusters\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			po := &previewOptions{options: &options{streams: Streams{Out: &out, ErrOut: &errOut}, output: "table"}, wait: true, timeout: time.Minute, maxWouldFail: tc.max}
			if tc.timeout != 0 {
				po.timeout = tc.timeout
			}
			last := tc.reads[len(tc.reads)-1]
			hub := &previewHub{reads: tc.reads, slices: []policyhubv1.ClusterStatusSlice{sliceOf(last, clusters...)}}
			err := po.show(t.Context(), hub, first)
			switch {
			case tc.findings:
				if !errors.Is(err, errFindings) {
					t.Errorf("error %v, want findings (exit 1)", err)
				}
			case tc.errSubstr != "":
				if err == nil || errors.Is(err, errFindings) || !strings.Contains(err.Error(), tc.errSubstr) {
					t.Errorf("error %v, want one with %q", err, tc.errSubstr)
				}
			case err != nil:
				t.Errorf("error %v", err)
			}
			if errOut.String() != tc.progress {
				t.Errorf("stderr:\n%s\nwant\n%s", errOut.String(), tc.progress)
			}
			// The report, when printed, has every cluster, the most newly failing first.
			if got := out.String(); tc.table != strings.Contains(got, "\nCLUSTER   REPORTED   RESOURCES   WOULD-FAIL   NEWLY-FAILING   DIFFER   FIRST NEWLY FAILING\na         yes") ||
				tc.table != strings.Contains(got, "\nb         yes") {
				t.Errorf("stdout (report printed: %v):\n%s", tc.table, got)
			}
		})
	}
}
