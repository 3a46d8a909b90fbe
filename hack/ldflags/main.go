// Command ldflags prints the -ldflags that stamp a build with its version, commit and date
// (internal/buildinfo.LDFlags), so that the release workflow stamps the kubectl plugin's archives
// as `make images` stamps the images.
//
//	go build -ldflags "-s -w $(go run ./hack/ldflags -version 0.1.0 -commit $SHA -date $DATE)" ./cmd/kubectl-policyhub
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

func main() {
	version := flag.String("version", "", "The version, as the images carry it: the charts' appVersion (no leading v).")
	commit := flag.String("commit", "", "The commit built.")
	date := flag.String("date", "", "The build date: the commit's time, RFC 3339.")
	flag.Parse()
	if *version == "" || *commit == "" || *date == "" {
		fmt.Fprintln(os.Stderr, "ldflags: -version, -commit and -date are required")
		os.Exit(2)
	}
	fmt.Println(buildinfo.LDFlags(*version, *commit, *date))
}
