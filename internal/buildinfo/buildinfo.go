// Package buildinfo says which build of policyhub a binary is. The version, commit and build
// date are set at link time (-ldflags -X, by `make build` and `make images`); a binary built
// without them (go run, go test) takes the commit from what Go recorded of the checkout. The Go
// version is the runtime's.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time: -X github.com/policyhub/policyhub/internal/buildinfo.Version=v0.1.0 and so on.
var (
	Version = "devel"
	Commit  = ""
	Date    = ""
)

// Info is a binary's build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
}

// Get returns this binary's build.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version()}
	if info.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Commit = s.Value
				case "vcs.time":
					if info.Date == "" {
						info.Date = s.Value
					}
				}
			}
		}
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}

// String is the line `--version` prints.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion)
}

// LDFlags are the -ldflags -X settings that stamp a build.
func LDFlags(version, commit, date string) string {
	const pkg = "github.com/policyhub/policyhub/internal/buildinfo"
	return fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s -X %s.Date=%s", pkg, version, pkg, commit, pkg, date)
}

// DefaultRegistry is where policyhub's images are published; the charts' default image
// repositories are under it.
const DefaultRegistry = "ghcr.io/policyhub"

// ImageReference names a command's image: <registry>/<command>:<version>, the version being the
// charts' appVersion. `make images` builds these, and the charts' defaults reference them.
func ImageReference(registry, command, version string) string {
	return fmt.Sprintf("%s/%s:%s", strings.TrimSuffix(registry, "/"), command, version)
}
