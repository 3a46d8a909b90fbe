package app

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

// kubectl policyhub --version prints what the hub and the agent print: version, commit, build
// date and Go version, and exits 0 without talking to a cluster.
func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"--version"}, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	info := buildinfo.Get()
	for _, want := range []string{info.Version, "commit " + info.Commit, "built " + info.Date, runtime.Version()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--version printed %q, want it to contain %q", out.String(), want)
		}
	}
}
