package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every sample in config/samples is admitted by the hub, so the samples users start from stay valid
// as the API's validation grows.
func TestSamplesAreAdmitted(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in config/samples (%v)", err)
	}
	createNamespace(ctx, t, hub, "shop")
	createNamespace(ctx, t, hub, "flux-system")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obj := object(t, string(data))
			if obj.GetKind() == "FleetPolicyException" {
				// An end date is bounded relative to the request: the sample's is moved to a week
				// from now, as a user sets one when applying it.
				if err := unstructured.SetNestedField(obj.Object, expiresIn(7*24*time.Hour), "spec", "expiresAt"); err != nil {
					t.Fatal(err)
				}
			}
			if err := hub.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("the hub refuses sample %s: %v", file, err)
			}
		})
	}
}
