// Package gittest serves a real Git repository over HTTP on 127.0.0.1 for the tests of what reads
// policies from Git: Git's own smart HTTP server (git http-backend, from Debian's git package) run
// as a CGI program by net/http/cgi, and the git CLI to commit.
package gittest

import (
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HTTPBackend is git http-backend as Debian's git package installs it.
const HTTPBackend = "/usr/lib/git-core/git-http-backend"

// Repo is a repository served until the test ends, with a working copy to commit from.
type Repo struct {
	// URL is the repository's clone URL (http://127.0.0.1:port/policies.git); Branch its branch.
	URL, Branch string
	work, bare  string
}

// Serve serves an empty repository (branch main) over HTTP until the test ends.
func Serve(t testing.TB) *Repo {
	t.Helper()
	if _, err := os.Stat(HTTPBackend); err != nil {
		t.Fatalf("%s is missing: install Debian's git package (apt-get install git): %v", HTTPBackend, err)
	}
	root := t.TempDir()
	r := &Repo{Branch: "main", work: filepath.Join(root, "work"), bare: filepath.Join(root, "repos", "policies.git")}
	run(t, root, "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	run(t, root, "init", "--quiet", "--initial-branch=main", r.work)
	srv := httptest.NewServer(&cgi.Handler{
		Path: HTTPBackend,
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Join(root, "repos"), "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/policies.git"
	return r
}

// Commit writes files (path → content; "" removes the file) in the working copy, commits them and
// pushes the commit to the served repository; it returns the commit's hash.
func (r *Repo) Commit(t testing.TB, message string, files map[string]string) string {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(r.work, filepath.FromSlash(path))
		if content == "" {
			if err := os.Remove(full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, r.work, "add", "--all")
	run(t, r.work, "-c", "user.name=policyhub-e2e", "-c", "user.email=e2e@policyhub.invalid", "commit", "--quiet", "-m", message)
	run(t, r.work, "push", "--quiet", r.bare, "main")
	return strings.TrimSpace(run(t, r.work, "rev-parse", "HEAD"))
}

// run runs git in dir and returns its output.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
