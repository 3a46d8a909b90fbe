package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// cliStatusRuns is how many times the CLI's status of one FleetPolicy is timed.
const cliStatusRuns = 5

// cliStatus times `kubectl policyhub status NAME -o json` of the scenario's first FleetPolicy,
// placed on every cluster: it joins the declaration's ClusterStatusSlices (listed in pages) into
// one table of every cluster. It checks that every cluster is listed.
func (b *bench) cliStatus(ctx context.Context, r *result) error {
	if len(r.fps) == 0 {
		return nil
	}
	logf("%s: kubectl policyhub status %s (%d clusters), %d times...", r.name, r.fps[0], r.clusters, cliStatusRuns)
	for range cliStatusRuns {
		var out, errOut bytes.Buffer
		start := time.Now()
		code := app.Run(ctx, []string{"--kubeconfig", b.f.Hub.Kubeconfig, "status", r.fps[0], "-o", "json"},
			app.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		took := time.Since(start)
		if code != 0 && code != 1 { // 1: violations found
			return fmt.Errorf("kubectl policyhub status %s: exit %d: %s", r.fps[0], code, errOut.String())
		}
		var report struct {
			Declarations []struct {
				Clusters []json.RawMessage `json:"clusters"`
			} `json:"declarations"`
		}
		if err := json.Unmarshal(out.Bytes(), &report); err != nil || len(report.Declarations) != 1 {
			return fmt.Errorf("kubectl policyhub status %s: %v", r.fps[0], err)
		}
		r.cli.listed = len(report.Declarations[0].Clusters)
		r.cli.bytes = out.Len()
		r.cli.times = append(r.cli.times, took.Seconds())
	}
	slices.Sort(r.cli.times)
	logf("%s: kubectl policyhub status: median %.2fs, %d clusters listed", r.name, r.cli.times[len(r.cli.times)/2], r.cli.listed)
	return nil
}
