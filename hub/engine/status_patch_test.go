package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// A reconcile writes the declaration's status once, as it ends, and only when asked to and when
// more than the churn changed; what follows the write runs after it, and not after a failure.
func TestStatusPatchWritesOnceAtTheEnd(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fp).WithStatusSubresource(fp).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	ctx := context.Background()
	read := func() statusOnly {
		got := &policyhubv1.FleetPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: "p"}, got); err != nil {
			t.Fatal(err)
		}
		return statusOnly{got}
	}
	wake := ctrl.Result{RequeueAfter: time.Minute}
	after := func(ran *bool) func(context.Context) ctrl.Result {
		return func(context.Context) ctrl.Result { *ran = true; return wake }
	}

	for _, tc := range []struct {
		name      string
		change    func(*policyhubv1.FleetPolicy)
		write     bool
		failed    error
		wantPatch int
		wantAfter bool
	}{
		{"not asked", func(fp *policyhubv1.FleetPolicy) { fp.Status.ObservedGeneration = 2 }, false, nil, 0, false},
		{"asked, changed", func(fp *policyhubv1.FleetPolicy) { fp.Status.ObservedGeneration = 2 }, true, nil, 1, true},
		{"asked, only churn", func(fp *policyhubv1.FleetPolicy) { fp.Status.Summary.Results.Pass++ }, true, nil, 0, true},
		{"asked, failed", func(fp *policyhubv1.FleetPolicy) { fp.Status.Summary.Results.Fail++ }, true, errors.New("boom"), 0, false},
	} {
		patches = 0
		d := read()
		status := newStatusPatch(c, d)
		tc.change(d.FleetPolicy)
		ran := false
		if tc.write {
			status.write(after(&ran))
		}
		res, err := status.finish(ctx, ctrl.Result{}, tc.failed)
		if patches != tc.wantPatch || ran != tc.wantAfter || !errors.Is(err, tc.failed) {
			t.Errorf("%s: %d patches, after ran %v, err %v; want %d, %v, %v", tc.name, patches, ran, err, tc.wantPatch, tc.wantAfter, tc.failed)
		}
		if tc.wantAfter && res != wake {
			t.Errorf("%s: result %+v, want what follows the write says (%+v)", tc.name, res, wake)
		}
	}
	if got := read(); got.Status.ObservedGeneration != 2 {
		t.Errorf("the written status: observedGeneration %d, want 2", got.Status.ObservedGeneration)
	}
}
