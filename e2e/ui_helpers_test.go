package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// startUI runs `kubectl policyhub ui --no-browser` in-process against the hub with the given extra
// arguments (e.g. --as) until the test ends, and returns the URL it printed (with its token).
func startUI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		args := append([]string{"--kubeconfig", fleetOf(t).Hub.Kubeconfig, "ui", "--no-browser"}, args...)
		done <- app.Run(ctx, args, app.Streams{In: strings.NewReader(""), Out: w, ErrOut: &errOut})
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != app.ExitOK {
				t.Errorf("kubectl policyhub ui exited %d: %s", code, errOut.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("kubectl policyhub ui did not stop within 10s of its context")
		}
	})
	urls := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/\?token=\S+)`).FindString(lines.Text()); m != "" {
				urls <- m
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case url := <-urls:
		return url
	case <-time.After(time.Minute):
		t.Fatalf("kubectl policyhub ui printed no URL within a minute; stderr: %s", errOut.String())
	}
	return ""
}

// uiBrowser is a tab of a headless Chromium (Debian's, from PATH) for the test, closed with it. Its
// profile directory carries the fleet's prefix so that hack/leftovers.sh finds a stray browser.
func uiBrowser(t *testing.T) context.Context {
	t.Helper()
	profile, err := os.MkdirTemp("", "policyhub-fleet-browser-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1440, 1000),
		// The machine's network is closed: Chromium's own services would only fail, noisily.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (make testbin installs it): %v", err)
	}
	return ctx
}

// browse runs actions in the tab, failing the test after timeout.
func browse(t *testing.T, tab context.Context, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// evaluate runs the JavaScript expression js in the tab's page and returns its value.
func evaluate[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// pageText is the text of the element selector on the tab's current page ("" when absent).
func pageText(t *testing.T, tab context.Context, selector string) string {
	t.Helper()
	return evaluate[string](t, tab, fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?e.innerText:""})()`, selector))
}

// screenshot keeps a PNG of the tab's page: in the test's temp dir, or, with
// POLICYHUB_UI_SCREENSHOTS=dir, in dir (docs/images, for the README and docs/web-view.md).
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("POLICYHUB_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, "ui-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", name, path, len(png))
}

// followToClusterViolations follows the page's link to cluster-1 and checks that the cluster's
// top violations show every one of wants (a resource, a policy, a rule, Kyverno's message).
func followToClusterViolations(t *testing.T, tab context.Context, wants ...string) {
	t.Helper()
	if err := browse(t, tab, 30*time.Second, chromedp.Click(chromedp.CSS(`#clusters a[href="/clusters/cluster-1"]`)),
		chromedp.WaitVisible(chromedp.CSS("#violations"))); err != nil {
		t.Fatalf("follow the cluster's link: %v", err)
	}
	violations := pageText(t, tab, "#violations")
	for _, want := range wants {
		if !strings.Contains(violations, want) {
			t.Errorf("the cluster's violations do not show %q:\n%s", want, violations)
		}
	}
}
