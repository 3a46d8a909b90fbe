package securitydoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// `pkg` `TestA`, `TestB`: tests of a package (a folder of the repository).
	packageTests = regexp.MustCompile("`((?:hub|agent|apis|ui|cmd|internal|hack)(?:/[\\w./-]+)?)`((?:[ ,;]*`(?:Test|Fuzz)\\w+`)+)")
	// `path_test.go` (`TestA`): a test in one file.
	fileTest = regexp.MustCompile("`([\\w./-]+_test\\.go)`\\s*\\(`((?:Test|Fuzz)\\w+)`")
	// `e2e/x_test.go` and other cited test files.
	testFile = regexp.MustCompile("`([\\w./-]+_test\\.go)`")
	testName = regexp.MustCompile("`((?:Test|Fuzz)\\w+)`")
)

// The tests docs/security.md cites exist where it says they are.
func TestSecurityPromisesCiteTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, m := range packageTests.FindAllStringSubmatch(string(doc), -1) {
		dir := m[1]
		if dir == "apis" {
			dir = "apis/policyhub/v1alpha1"
		}
		for _, name := range testName.FindAllStringSubmatch(m[2], -1) {
			cited++
			if !definedIn(t, filepath.Join(root, dir), name[1]) {
				t.Errorf("docs/security.md cites %s in %s: no such test there", name[1], m[1])
			}
		}
	}
	for _, m := range fileTest.FindAllStringSubmatch(string(doc), -1) {
		cited++
		if !definedInFile(t, filepath.Join(root, m[1]), m[2]) {
			t.Errorf("docs/security.md cites %s in %s: no such test there", m[2], m[1])
		}
	}
	for _, m := range testFile.FindAllStringSubmatch(string(doc), -1) {
		cited++
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("docs/security.md cites %s: %v", m[1], err)
		}
	}
	if cited < 50 {
		t.Fatalf("found %d citations in docs/security.md: the patterns no longer read it", cited)
	}
}

// definedIn says whether a test file of dir defines the test or fuzz target name.
func definedIn(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if definedInFile(t, f, name) {
			return true
		}
	}
	return false
}

// definedInFile says whether file defines the test or fuzz target name.
func definedInFile(t *testing.T, file, name string) bool {
	src, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	return strings.Contains(string(src), "\nfunc "+name+"(t *testing.T)") || strings.Contains(string(src), "\nfunc "+name+"(f *testing.F)")
}
