package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
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

// cliFleetPolicy names the cli scenario's FleetPolicy.
const cliFleetPolicy = "bench-cli"

// runCLI is the cli scenario: `kubectl policyhub status NAME` of a FleetPolicy on -cli-clusters
// clusters, the fleet size no run of the other scenarios reaches here. The FleetPolicy is
// suspended and its ClusterStatusSlices are written by the benchmark as the hub writes them (100
// clusters each, owned by it, every cluster with a phase, a message, results and times), so what
// is timed is the CLI's read alone: the slices listed in pages and joined.
func (b *bench) runCLI(ctx context.Context) error {
	n := b.o.cliClusters
	fp, err := benchkit.FleetPolicy(cliFleetPolicy, 0, map[string]string{setLabel: "cli"})
	if err != nil {
		return err
	}
	fp.Spec.Suspend = true
	if err := b.hub.Create(ctx, fp); err != nil {
		return fmt.Errorf("cli: create FleetPolicy %s: %w", cliFleetPolicy, err)
	}
	defer func() {
		if err := b.hub.Delete(context.Background(), fp); err != nil {
			logf("cli: delete %s: %v", cliFleetPolicy, err)
		}
	}()
	logf("cli: writing the ClusterStatusSlices of %d clusters...", n)
	now := metav1.Now()
	perSlice := policyhubv1.MaxClustersPerSlice
	count := (n + perSlice - 1) / perSlice
	err = inParallel(8, count, func(i int) error {
		slice := &policyhubv1.ClusterStatusSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: b.f.SecretNamespace,
				Name:      policyhubv1.ClusterStatusSliceName(policyhubv1.KindFleetPolicy, string(fp.UID), i),
				Labels:    map[string]string{policyhubv1.LabelDeclarationUID: string(fp.UID)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: policyhubv1.GroupVersion.String(), Kind: policyhubv1.KindFleetPolicy,
					Name: fp.Name, UID: fp.UID, Controller: ptr.To(true)}},
			},
			Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: fp.Name, UID: string(fp.UID)},
		}
		for c := i * perSlice; c < min(n, (i+1)*perSlice); c++ {
			s := policyhubv1.ClusterStatus{Name: fmt.Sprintf("cli-%05d", c), Phase: policyhubv1.ClusterPhaseSynced,
				Message: "1 object unchanged", InForce: ptr.To(true), LastSyncTime: &now, ReportTime: &now,
				Actions: policyhubv1.ActionCounts{Unchanged: 1}, Results: &policyhubv1.ResultCounts{Pass: 40, Fail: int64(c % 3)}}
			if c%10 == 0 {
				s.Phase, s.InForce, s.Message = policyhubv1.ClusterPhaseFailed, nil,
					"reach the cluster: Get \"https://gateway/apis/cluster.core.oam.dev/v1alpha1/clustergateways/"+s.Name+"/proxy/api\": context deadline exceeded"
			}
			slice.Clusters = append(slice.Clusters, s)
		}
		return b.hub.Create(ctx, slice)
	})
	if err != nil {
		return fmt.Errorf("cli: write the slices: %w", err)
	}
	r := &result{name: "cli", clusters: n, fps: []string{cliFleetPolicy}}
	if err := b.cliStatus(ctx, r); err != nil {
		return err
	}
	if r.cli.listed != n {
		return fmt.Errorf("cli: kubectl policyhub status listed %d clusters of %d", r.cli.listed, n)
	}
	b.cli = r
	return nil
}
