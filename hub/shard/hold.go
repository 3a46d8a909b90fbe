package shard

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Timing of a replica's Lease: a replica that dies is judged gone LeaseDuration after the hub last
// saw it renew, and its clusters move then; a replica that stops releases its Lease at once. It
// renews every RetryPeriod, the only write a replica makes with time (as a kubelet renews its
// node Lease): a quiet fleet costs the hub one write per replica every few seconds, not one per
// cluster.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 5 * time.Second
)

// Replica is one hub replica's place among the others.
type Replica struct {
	// HubID is the hub's id; Namespace the hub's namespace, where the replicas' Leases are.
	HubID, Namespace string
	// Name is the replica's name among the others (a pod's name); Identity the holder identity
	// written in its Lease (this process's, so that a restarted replica is told apart).
	Name, Identity string
}

// Validate says what is wrong with the replica's names, naming the flag that sets them.
func (r Replica) Validate() error {
	if errs := validation.IsDNS1123Subdomain(policyhubv1.ReplicaLeaseName(r.HubID, r.Name)); r.Name == "" || len(errs) > 0 {
		return fmt.Errorf("--replica-name %q must make the Lease name %q valid: %v", r.Name, policyhubv1.ReplicaLeaseName(r.HubID, r.Name), errs)
	}
	// The name is a label's value: on the clusters pinned to it, and on the summaries it works.
	if errs := validation.IsValidLabelValue(r.Name); len(errs) > 0 {
		return fmt.Errorf("--replica-name %q must be a valid label value: %v", r.Name, errs)
	}
	return nil
}

// Hold takes the replica's own Lease and renews it until ctx ends, then releases it, so that the
// other replicas take its clusters at once rather than after the Lease expires. Nobody else
// contends for the Lease; holding it is what tells the others this replica is alive. It returns
// when ctx ends, or when the replica could not renew within RenewDeadline (then it must stop
// working its clusters: the others will take them).
func Hold(ctx context.Context, leases coordinationv1client.LeasesGetter, r Replica) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.Namespace, Name: policyhubv1.ReplicaLeaseName(r.HubID, r.Name)},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: r.Identity},
		Labels:     map[string]string{policyhubv1.LabelReplicaOf: r.HubID},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: LeaseDuration, RenewDeadline: RenewDeadline, RetryPeriod: RetryPeriod,
		ReleaseOnCancel: true, Name: lock.LeaseMeta.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				log.FromContext(ctx).Info("holding this replica's Lease", "lease", lock.LeaseMeta.Name)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("replica Lease %s: %w", lock.LeaseMeta.Name, err)
	}
	elector.Run(ctx) // returns when ctx ends (the Lease released) or a renewal failed
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("replica Lease %s/%s: not renewed within %s", r.Namespace, lock.LeaseMeta.Name, RenewDeadline)
}
