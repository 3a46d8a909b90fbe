package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/internal/buildinfo"
)

// hubInfo publishes the hub's id (and version) on the hub when the manager starts, in every
// replica: `kubectl policyhub` reads it instead of being told --hub-id.
type hubInfo struct {
	client    client.Client
	namespace string
	hubID     string
}

var _ manager.LeaderElectionRunnable = hubInfo{}

// NeedLeaderElection is false: every replica publishes the same content.
func (hubInfo) NeedLeaderElection() bool { return false }

// Start writes the ConfigMap. A hub whose namespace does not exist stops, naming it: its Leases,
// the FleetPolicies' ClusterStatusSlices and this ConfigMap live there, and without it every
// status write would fail, seen only in the log. A hub that may not write the ConfigMap (no
// RBAC) runs on: the CLI's --hub-id still works; the error is logged.
func (h hubInfo) Start(ctx context.Context) error {
	cm := applycorev1.ConfigMap(policyhubv1.HubInfoName, h.namespace).
		WithLabels(map[string]string{policyhubv1.LabelHubInfo: "true"}).
		WithData(map[string]string{policyhubv1.HubInfoIDKey: h.hubID, "version": buildinfo.Get().Version})
	err := h.client.Apply(ctx, cm, client.FieldOwner("policyhub-hub"), client.ForceOwnership)
	if namespaceMissing(err) {
		return fmt.Errorf("the hub's namespace %q does not exist: create it (kubectl create namespace %s) or name another with --leader-election-namespace; "+
			"the hub keeps its Leases, the FleetPolicies' ClusterStatusSlices and its id there", h.namespace, h.namespace)
	}
	if err != nil {
		log.FromContext(ctx).Error(fmt.Errorf("publish the hub's id in ConfigMap %s/%s: %w", h.namespace, policyhubv1.HubInfoName, err),
			"kubectl policyhub will need --hub-id")
	}
	return nil
}

// namespaceMissing says whether err is the apiserver's refusal of a write into a namespace that
// does not exist (404 for the namespace itself, not for the object).
func namespaceMissing(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces"
}
