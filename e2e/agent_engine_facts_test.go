package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// The agent reports its cluster's Kyverno as the cluster shows it: the version of the admission
// controller's Deployment (its image tag, with where it was read), the exception settings of its
// flags, and the Kyverno policy APIs the cluster serves; a change of the Deployment reaches the
// hub without a restart, and an image pinned by digest only says why the version is unknown.
func TestAgentReportsKyvernoEngineFacts(t *testing.T) {
	ctx := testContext(t)
	const cluster = "cluster-1"
	startAgent(t, cluster)

	source := "image tag of Deployment " + fleet.KyvernoNamespace + "/" + kyvernoAdmissionDeployment
	eventually(t, 60*time.Second, 500*time.Millisecond, "the summary's engine facts", func() error {
		e, err := engineOf(t, cluster)
		if err != nil {
			return err
		}
		k := e.Kyverno
		switch {
		case k == nil:
			return fmt.Errorf("no Kyverno facts: %+v", e)
		case k.Version != fleet.KyvernoVersion || k.VersionSource != source:
			return fmt.Errorf("version %q from %q, want %q from %q", k.Version, k.VersionSource, fleet.KyvernoVersion, source)
		case k.PolicyExceptions == nil || !*k.PolicyExceptions || k.ExceptionNamespace != policyhubv1.DefaultExceptionNamespace:
			return fmt.Errorf("exceptions %v in %q, want enabled in %q", k.PolicyExceptions, k.ExceptionNamespace, policyhubv1.DefaultExceptionNamespace)
		case len(k.ReportedResults) != 0:
			return fmt.Errorf("reported results %q, want none named (every result)", k.ReportedResults)
		}
		served, err := servedPolicyAPIs(t, cluster)
		if err != nil {
			return err
		}
		if !slices.Equal(e.PolicyAPIs, served) || !slices.Contains(served, "kyverno.io/v1") || !slices.Contains(served, "policies.kyverno.io/v1") {
			return fmt.Errorf("policy APIs %q, the cluster serves %q", e.PolicyAPIs, served)
		}
		return nil
	})

	// The same Deployment pinned by digest only: no version, and the source says why.
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: fleet.KyvernoNamespace, Name: kyvernoAdmissionDeployment}, dep); err != nil {
		t.Fatal(err)
	}
	image := dep.Spec.Template.Spec.Containers[0].Image
	t.Cleanup(func() { setImage(t, cluster, image) })
	setImage(t, cluster, "reg.kyverno.io/kyverno/kyverno@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	eventually(t, 30*time.Second, 500*time.Millisecond, "the digest-only image's facts", func() error {
		e, err := engineOf(t, cluster)
		if err != nil {
			return err
		}
		if k := e.Kyverno; k == nil || k.Version != "" || k.VersionSource != source+": pinned by digest only, no tag" {
			return fmt.Errorf("facts %+v", k)
		}
		return nil
	})
}

// setImage sets the image of the cluster's Kyverno admission controller Deployment's container.
func setImage(t *testing.T, cluster, image string) {
	t.Helper()
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	dep := &appsv1.Deployment{}
	ctx := testContext(t)
	if err := c.Get(ctx, client.ObjectKey{Namespace: fleet.KyvernoNamespace, Name: kyvernoAdmissionDeployment}, dep); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Template.Spec.Containers[0].Image = image
	if err := c.Patch(ctx, dep, patch); err != nil {
		t.Fatalf("set the image of %s: %v", kyvernoAdmissionDeployment, err)
	}
}
