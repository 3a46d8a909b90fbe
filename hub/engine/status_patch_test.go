package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// statusOnly is a Declaration of which the status patch reads the object alone.
type statusOnly struct{ *policyhubv1.FleetPolicy }

func (d statusOnly) Object() policyhubv1.Declaration { return d.FleetPolicy }
func (d statusOnly) Kind() string                    { return policyhubv1.KindFleetPolicy }
func (d statusOnly) Source(string) string            { return "" }
func (d statusOnly) Suspended() bool                 { return false }
func (d statusOnly) Prune() bool                     { return true }
func (d statusOnly) Render(context.Context) (*Rendering, error) {
	return nil, errors.New("not rendered")
}
func (d statusOnly) RenderInput() string { return "" }
func (d statusOnly) SetResults(c []policyhubv1.ClusterStatus, _ SummaryRead, _ map[string][]aggregate.Policy, _ time.Time) []policyhubv1.ClusterStatus {
	return c
}
func (d statusOnly) Progress(*Rendering, []Outcome, []policyhubv1.ClusterStatus, time.Time) Progress {
	return Progress{}
}
func (d statusOnly) AfterStatus(context.Context) time.Duration { return 0 }
func (d statusOnly) Copy() Declaration                         { return statusOnly{d.FleetPolicy.DeepCopy()} }

// A reconcile that failed, or that no phase asked to write, writes no status and runs nothing of
// what follows a write; one whose changes are churn alone writes nothing but runs what follows.
// The patch has no client here: a write would panic. (That a changed status is written once, and
// churn not at all, is shown on the fleet: e2e TestHubStatusNotWrittenForChurn.)
func TestStatusPatchWritesNothingWhenFailedUnaskedOrChurn(t *testing.T) {
	wake := ctrl.Result{RequeueAfter: time.Minute}
	for _, tc := range []struct {
		name      string
		change    func(*policyhubv1.FleetPolicy)
		write     bool
		failed    error
		wantAfter bool
	}{
		{"not asked", func(fp *policyhubv1.FleetPolicy) { fp.Status.ObservedGeneration = 2 }, false, nil, false},
		{"asked, failed", func(fp *policyhubv1.FleetPolicy) { fp.Status.ObservedGeneration = 2 }, true, errors.New("boom"), false},
		{"asked, only churn", func(fp *policyhubv1.FleetPolicy) { fp.Status.Summary.Results.Pass++ }, true, nil, true},
	} {
		d := statusOnly{&policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}}
		status := newStatusPatch(nil, d)
		tc.change(d.FleetPolicy)
		ran := false
		if tc.write {
			status.write(func(context.Context) ctrl.Result { ran = true; return wake })
		}
		res, err := status.finish(context.Background(), ctrl.Result{}, tc.failed)
		if ran != tc.wantAfter || !errors.Is(err, tc.failed) {
			t.Errorf("%s: what follows the write ran %v, err %v; want %v, %v", tc.name, ran, err, tc.wantAfter, tc.failed)
		}
		if tc.wantAfter && res != wake {
			t.Errorf("%s: result %+v, want what follows the write says (%+v)", tc.name, res, wake)
		}
	}
}
