package benchkit

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

func TestInParallelRunsEveryIndexAndKeepsEveryError(t *testing.T) {
	var ran [50]atomic.Int32
	errs := InParallel(4, len(ran), func(i int) error {
		ran[i].Add(1)
		if i%10 == 0 {
			return fmt.Errorf("work %d", i)
		}
		return nil
	})
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Errorf("work(%d) ran %d times, want 1", i, n)
		}
	}
	if len(errs) != 5 {
		t.Errorf("%d errors, want 5: %v", len(errs), errors.Join(errs...))
	}
	if errs := InParallel(3, 10, func(int) error { return nil }); errs != nil {
		t.Errorf("no failure, errors %v", errs)
	}
}

func TestFleetPolicy(t *testing.T) {
	fp, err := FleetPolicy("p-7", 7, map[string]string{"env": "bench"})
	if err != nil {
		t.Fatal(err)
	}
	if fp.Name != "p-7" || fp.Spec.Placement.ClusterSelector.MatchLabels["env"] != "bench" {
		t.Errorf("name %q, selector %v", fp.Name, fp.Spec.Placement.ClusterSelector)
	}
	if fp.Spec.Template.Kind != "ClusterPolicy" || fp.Spec.Template.APIVersion != "kyverno.io/v1" {
		t.Errorf("template %s %s, want kyverno.io/v1 ClusterPolicy", fp.Spec.Template.APIVersion, fp.Spec.Template.Kind)
	}
}
