package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `DEMO_ONESHOT=1 make demo` (here: its program, from the repository's root) prints the three
// tables with shop's violation in staging, Kyverno's refusal in prod, the hub's /metrics refused
// without a token and served over HTTPS to the metrics reader's, the web view's URL (which opens
// on the fleet grid), and leaves no process behind.
func TestDemoOneShot(t *testing.T) {
	inParallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./e2e/demo")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "DEMO_ONESHOT=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, text)
	}
	for _, want := range []string{
		"$ kubectl policyhub clusters", "$ kubectl policyhub status", "$ kubectl policyhub info shop -n shop",
		"$ kubectl policyhub rollout status", "require-owner-label",
		"FleetPolicy/disallow-latest-tag", "Deployment/shop/web",
		"Kyverno refused it", "The image tag latest is not allowed: pin a version.",
		"KUBECONFIG=", "/metrics", "without a token: 401 Unauthorized",
		"the web view: http://127.0.0.1:", "the web view answered 200 OK at /fleet", "the grid shown",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	// The clusters table: shop's violation counts in staging.
	if !regexp.MustCompile(`(?m)^cluster-1\s+yes\s+.*\s+[1-9]\d*\s+\d+\s+\d+\s+env=staging$`).MatchString(text) {
		t.Errorf("the clusters table shows no failure for cluster-1:\n%s", text)
	}
	// The hub's /metrics over HTTPS: its apiserver authenticated and authorized the reader's token.
	if !regexp.MustCompile(`with the metrics reader's token: 200 OK, [1-9]\d* policyhub series`).MatchString(text) {
		t.Errorf("the metrics reader could not scrape the hub's /metrics:\n%s", text)
	}
	// Nothing the demo started is left: no process runs from its fleet's directory.
	dir := regexp.MustCompile(`logs to (/\S+)/logs`).FindStringSubmatch(text)
	if dir == nil {
		t.Fatalf("the demo did not say where its fleet lives:\n%s", text)
	}
	if ps, _ := exec.Command("pgrep", "-f", dir[1]).Output(); len(strings.TrimSpace(string(ps))) > 0 {
		t.Errorf("processes of the demo's fleet are still running: %s", ps)
	}
}
