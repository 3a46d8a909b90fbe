package app

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The local view listens on loopback only: any other address is refused before the hub is read.
func TestUIListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.10:80", "example.com:80", "nonsense"} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), []string{"--kubeconfig", "/nonexistent", "ui", "--no-browser", "--address", addr}, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		if code != ExitError || !strings.Contains(errOut.String(), "--address") || strings.Contains(errOut.String(), "kubeconfig") {
			t.Errorf("--address %s: exit %d, stderr %q; want exit 2 naming --address, before any kubeconfig is read", addr, code, errOut.String())
		}
	}
}
