// Command krew writes the krew plugin manifest of kubectl-policyhub for a release: one platform
// per archive the release workflow builds, each with its download URL and the SHA-256 from the
// release's checksums file.
//
//	go run ./hack/krew -version v0.1.0 -checksums dist/checksums.txt -out dist/policyhub.yaml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Platforms are the release's kubectl-policyhub archives (.github/workflows/release.yml builds
// the same list).
var Platforms = []struct{ OS, Arch string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

// releases is where a release's assets are downloaded from.
const releases = "https://github.com/policyhub/policyhub/releases/download"

func main() {
	version := flag.String("version", "", "The release's tag, vX.Y.Z.")
	checksums := flag.String("checksums", "", "The release's checksums file (sha256sum output).")
	out := flag.String("out", "", "Where to write the manifest (default: stdout).")
	flag.Parse()
	if err := run(*version, *checksums, *out); err != nil {
		fmt.Fprintf(os.Stderr, "krew: %v\n", err)
		os.Exit(1)
	}
}

func run(version, checksumsPath, out string) error {
	f, err := os.Open(checksumsPath)
	if err != nil {
		return err
	}
	defer f.Close()
	sums, err := ReadChecksums(f)
	if err != nil {
		return fmt.Errorf("%s: %w", checksumsPath, err)
	}
	manifest, err := Manifest(version, sums)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(manifest)
		return err
	}
	return os.WriteFile(out, manifest, 0o644)
}

// Archive is the name of a platform's archive in a release.
func Archive(version, os, arch string) string {
	return fmt.Sprintf("kubectl-policyhub_%s_%s_%s.tar.gz", version, os, arch)
}

var sha256Line = regexp.MustCompile(`^([0-9a-f]{64})\s+\*?(?:\./)?(\S+)$`)

// ReadChecksums reads sha256sum's output: file name to hex digest.
func ReadChecksums(r io.Reader) (map[string]string, error) {
	sums := map[string]string{}
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		m := sha256Line.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a sha256sum line: %q", line)
		}
		sums[m[2]] = m[1]
	}
	return sums, scanner.Err()
}

// Manifest is the krew Plugin manifest of the release.
func Manifest(version string, sums map[string]string) ([]byte, error) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(version) {
		return nil, fmt.Errorf("version %q: want a release tag, vX.Y.Z", version)
	}
	var platforms []map[string]any
	for _, p := range Platforms {
		archive := Archive(version, p.OS, p.Arch)
		sum, ok := sums[archive]
		if !ok {
			return nil, fmt.Errorf("no checksum for %s", archive)
		}
		bin := "kubectl-policyhub"
		if p.OS == "windows" {
			bin += ".exe"
		}
		platforms = append(platforms, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]string{"os": p.OS, "arch": p.Arch}},
			"uri":      fmt.Sprintf("%s/%s/%s", releases, version, archive),
			"sha256":   sum,
			"bin":      bin,
		})
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "policyhub"},
		"spec": map[string]any{
			"version":          version,
			"homepage":         "https://github.com/policyhub/policyhub",
			"shortDescription": "Kyverno policies across a fleet of clusters",
			"description": "kubectl policyhub talks to a policyhub hub: the fleet's clusters and their compliance, the\n" +
				"declarations' status per cluster, an application's policy results, a dry-run of the hub's\n" +
				"sync, and a pre-deploy check of manifests against a cluster's Kyverno.",
			"platforms": platforms,
		},
	})
}
