package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A hub started with a namespace of its own that does not exist stops at once with an error
// naming it and how to fix it, instead of running with every status write failing in its log.
func TestHubRefusesAMissingNamespace(t *testing.T) {
	binary := buildHubBinary(t)
	const missing = "e2e-no-such-hub-namespace"
	cmd := runHubProcess(t, binary, "missing-namespace", "--leader-election-namespace="+missing)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("the hub ended with %v, want a non-zero exit", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the hub still runs a minute after starting with a missing namespace")
	}
	log, err := os.ReadFile(filepath.Join(fleetOf(t).LogDir, "policyhub-hub-missing-namespace.log"))
	if err != nil {
		t.Fatal(err)
	}
	out := string(log)
	if len(out) > 2000 {
		out = out[len(out)-2000:]
	}
	for _, want := range []string{`the hub's namespace "` + missing + `" does not exist`, "kubectl create namespace " + missing, "--leader-election-namespace"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the hub's output lacks %q; it ends:\n%s", want, out)
		}
	}
}
