package gittest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

func TestCloneOverHTTP(t *testing.T) {
	r := Serve(t)
	sha := r.Commit(t, "first", map[string]string{"staging/a.yaml": "a: 1\n"})
	dir := t.TempDir()
	out, err := exec.Command("git", "clone", "--quiet", r.URL, filepath.Join(dir, "c")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	head, _ := exec.Command("git", "-C", filepath.Join(dir, "c"), "rev-parse", "HEAD").Output()
	if string(head[:40]) != sha {
		t.Fatalf("%s vs %s", head, sha)
	}
}
