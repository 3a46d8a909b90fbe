package main

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// statusFloor measures the least time the hub's apiserver here takes to take one new result
// into every FleetPolicy's status: each status written once, by the patch the hub sends (the
// whole clusters list, one cluster's results changed), floorConcurrency at a time, with the
// hub stopped so that nothing else runs. No summary can reach every status faster than one such
// round after it is stored, whatever the hub does; at 100 summaries a second the rounds follow
// each other, so a round longer than the summary-to-status target rules the target out here.
func (b *bench) statusFloor(ctx context.Context, r *result) error {
	const rounds = 3
	logf("%s: status write floor: %d rounds of one status write per FleetPolicy...", r.name, rounds)
	before := b.snapshot(nil)
	start := time.Now()
	var fastest time.Duration
	for round := range rounds {
		roundStart := time.Now()
		err := inParallel(floorConcurrency, len(r.fps), func(i int) error {
			// One write of the first slice of the FleetPolicy's per-cluster state: what a result
			// arriving from one cluster costs the hub's apiserver.
			fp := &policyhubv1.FleetPolicy{}
			if err := b.hub.Get(ctx, client.ObjectKey{Name: r.fps[i]}, fp); err != nil {
				return err
			}
			slice := &policyhubv1.ClusterStatusSlice{}
			key := client.ObjectKey{Namespace: b.f.SecretNamespace, Name: policyhubv1.ClusterStatusSliceName(policyhubv1.KindFleetPolicy, string(fp.UID), 0)}
			if err := b.hub.Get(ctx, key, slice); err != nil {
				return fmt.Errorf("FleetPolicy %s's first ClusterStatusSlice: %w", fp.Name, err)
			}
			if len(slice.Clusters) == 0 || slice.Clusters[0].Results == nil {
				return fmt.Errorf("FleetPolicy %s has no results in its first slice to change", fp.Name)
			}
			slice.Clusters[round%len(slice.Clusters)].Results.Pass++
			return b.hub.Update(ctx, slice)
		})
		if err != nil {
			return fmt.Errorf("status write floor: %w", err)
		}
		if took := time.Since(roundStart); round == 0 || took < fastest {
			fastest = took
		}
	}
	r.floor.ran = true
	r.floor.round = fastest
	r.floor.rounds = rounds
	r.floor.took = time.Since(start)
	r.floor.cpu = cpuBetween(before, b.snapshot(nil))
	logf("%s: status write floor: fastest round %s; hub kube-apiserver %.1f CPU-s over %d rounds", r.name, fastest.Round(10*time.Millisecond), r.floor.cpu[partHubAPIServer], rounds)
	return nil
}

// floorConcurrency is the hub's default --max-concurrent-reconciles: the status writes it has in
// flight at most.
const floorConcurrency = 8
