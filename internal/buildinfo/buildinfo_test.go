package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestInfoString(t *testing.T) {
	i := Info{Version: "0.1.0", Commit: "abc123", Date: "2026-11-24T00:00:00Z", GoVersion: "go1.26.0"}
	if got, want := i.String(), "0.1.0 (commit abc123, built 2026-11-24T00:00:00Z, go1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	got := Get()
	if got.Version != Version || got.GoVersion != runtime.Version() || got.Commit == "" || got.Date == "" {
		t.Errorf("Get() = %+v: want the link-time version, the runtime's Go version and a commit and date (or unknown)", got)
	}
	if flags := LDFlags("1", "c", "d"); !strings.Contains(flags, "buildinfo.Version=1") || !strings.Contains(flags, "buildinfo.Commit=c") || !strings.Contains(flags, "buildinfo.Date=d") {
		t.Errorf("LDFlags = %q", flags)
	}
}
