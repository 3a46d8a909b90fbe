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

// hubAdmission is policyhub's admission policy for the hub, installed as a user would.
const hubAdmission = "config/admission/finalizer.yaml"

// installAdmission applies policyhub's admission policy to the hub and waits until the apiserver
// applies it: a dry-run creation of a FleetPolicy comes back with the finalizer.
func installAdmission(ctx context.Context, hub client.Client) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	objs, err := readObjects(filepath.Join(root, hubAdmission))
	if err != nil {
		return err
	}
	if err := applyObjects(ctx, hub, objs); err != nil {
		return err
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
		return slices.Contains(probe.GetFinalizers(), controllers.Finalizer), nil
	})
}
