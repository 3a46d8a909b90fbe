package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := buildinfo.Info{Version: "0.1.0", Commit: "abc", Date: "2026-11-24T00:00:00Z", GoVersion: "go1.26.0"}
	if err := RegisterBuildInfo(reg, build); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP policyhub_build_info The policyhub-hub build: version, commit, build date and Go version, as labels; always 1.
# TYPE policyhub_build_info gauge
policyhub_build_info{build_date="2026-11-24T00:00:00Z",commit="abc",go_version="go1.26.0",version="0.1.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_build_info"); err != nil {
		t.Error(err)
	}
	if err := RegisterBuildInfo(reg, build); err == nil {
		t.Error("registering it twice must fail")
	}
}
