package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// serveUI runs `kubectl policyhub ui` over the demo's hub and returns the URL it printed (with
// its one-time token). In one-shot mode it opens the URL once, as a browser would, and says
// what came back.
func (d *demo) serveUI(ctx context.Context, oneShot bool) (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	d.say("starting the web view (kubectl policyhub ui)...")
	if err := d.f.Run("kubectl-policyhub-ui", filepath.Join(d.bin, "kubectl-policyhub"), "--kubeconfig", d.f.Hub.Kubeconfig,
		"ui", "--no-browser", "--address", "127.0.0.1:"+strconv.Itoa(ports[0])); err != nil {
		return "", err
	}
	logPath := filepath.Join(d.f.LogDir, "kubectl-policyhub-ui.log")
	printed := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=\S+`)
	var url string
	err = d.waitFor(ctx, "the web view", func() (string, bool, error) {
		log, err := os.ReadFile(logPath)
		if err != nil && !os.IsNotExist(err) {
			return "", false, err
		}
		url = printed.FindString(string(log))
		return "no URL in " + logPath + " yet", url != "", nil
	})
	if err != nil || !oneShot {
		return url, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return "", err
	}
	get, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(get, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		return "", fmt.Errorf("open the web view: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	d.say("the web view answered %s at %s: %d bytes, the grid %s", resp.Status, resp.Request.URL.Path, len(body),
		map[bool]string{true: "shown", false: "missing"}[strings.Contains(string(body), `id="grid"`)])
	return url, nil
}
