package fleet

import (
	"context"
	"testing"
	"time"
)

// StartForTest starts a fleet for the calling test alone and stops it when the test ends, keeping
// its logs (and saying where) if the test failed.
func StartForTest(t testing.TB, opts Options) *Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start this test's fleet: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.Keep()
			t.Logf("this test's fleet logs: %s", f.LogDir)
		}
		if err := f.Stop(); err != nil {
			t.Errorf("stop this test's fleet: %v", err)
		}
	})
	return f
}
