package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/controllers"
)

// hubAdmission are policyhub's admission policies for the hub, installed as a user of a 1.36 hub
// would: the finalizer's, and the exceptions' (the fence: requester checked, approval guarded,
// lifetime bounded; and the requester stamped).
var hubAdmission = []string{"config/admission/finalizer.yaml", "config/admission/exceptions.yaml", "config/admission/exceptions-requester-stamp.yaml"}

// installAdmission applies policyhub's admission policies to the hub and waits until the
// apiserver applies them: a dry-run creation of a FleetPolicy comes back with the finalizer, and
// one of a FleetPolicyException with its requester stamped.
func installAdmission(ctx context.Context, hub client.Client) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	for _, file := range hubAdmission {
		objs, err := readObjects(filepath.Join(root, file))
		if err != nil {
			return err
		}
		if err := applyObjects(ctx, hub, objs); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return poll(ctx, 100*time.Millisecond, "the finalizer admission policy in effect", nil, func(ctx context.Context) (bool, error) {
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policyhub.io/v1alpha1", "kind": "FleetPolicy",
			"metadata": map[string]any{"name": "admission-probe"},
			"spec": map[string]any{
				"placement": map[string]any{},
				"template":  map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "spec": map[string]any{"rules": []any{}}},
			},
		}}
		if err := hub.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, fmt.Errorf("dry-run FleetPolicy: %w", err)
		}
		if !slices.Contains(probe.GetFinalizers(), controllers.Finalizer) {
			return false, nil
		}
		exception := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policyhub.io/v1alpha1", "kind": "FleetPolicyException",
			"metadata": map[string]any{"name": "admission-probe", "namespace": "default"},
			"spec": map[string]any{
				"target":    map[string]any{"kind": "FleetPolicy", "name": "probe"},
				"resources": map[string]any{"namespaces": []any{"probe"}},
				"clusters":  map[string]any{"names": []any{"probe"}},
				"owner":     "probe", "reason": "probe", "ticket": "probe",
				"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			},
		}}
		if err := hub.Create(ctx, exception, client.DryRunAll); err != nil {
			return false, nil // the lifetime policy may refuse it until the apiserver sees it whole
		}
		requestedBy, _, _ := unstructured.NestedString(exception.Object, "spec", "requestedBy")
		return requestedBy != "", nil
	})
}
