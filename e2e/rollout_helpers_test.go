package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// rolloutPolicy is a FleetPolicy on cluster-1 (staging) and cluster-2 (prod) rolled out in the
// given waves (YAML list items, indented for spec.rollout.waves); its ClusterPolicy requires
// the labels of the Deployments of namespace ns.
func rolloutPolicy(name, ns, waves string, labels ...string) string {
	var pattern strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&pattern, "\n                %s: \"?*\"", l)
	}
	return fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  rollout:
    waves:
%s
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec:
      background: true
      rules:
      - name: need-labels
        match:
          any:
          - resources:
              kinds: [Deployment]
              namespaces: [%s]
        validate:
          failureAction: Enforce
          message: "Deployments need the labels %s"
          pattern:
            metadata:
              labels:%s
`, name, waves, ns, strings.Join(labels, ", "), pattern.String())
}

// wave returns the FleetPolicy's status of the wave, or a Pending one when there is none yet.
func wave(fp *fleetView, name string) policyhubv1.WaveStatus { return waveOf(fp.Status.Rollout, name) }

// waveOf returns a rollout's status of the wave, or a Pending one when there is none yet.
func waveOf(st *policyhubv1.RolloutStatus, name string) policyhubv1.WaveStatus {
	if st != nil {
		for _, w := range st.Waves {
			if w.Name == name {
				return w
			}
		}
	}
	return policyhubv1.WaveStatus{Name: name, Phase: policyhubv1.WavePending}
}

// wavePhases says where every wave is, e.g. "staging=Done prod=Auditing".
func wavePhases(fp *fleetView) string { return phasesOf(fp.Status.Rollout) }

// phasesOf says where every wave of a rollout is.
func phasesOf(st *policyhubv1.RolloutStatus) string {
	if st == nil {
		return "(no rollout status)"
	}
	var parts []string
	for _, w := range st.Waves {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", w.Name, w.Phase, w.Reason))
	}
	return strings.Join(parts, " ")
}

// readFleetPolicy reads the FleetPolicy, and its state in each cluster, from the hub.
func readFleetPolicy(t *testing.T, name string) *fleetView {
	t.Helper()
	fp, err := fleetPolicyWithClusters(testContext(t), directClient(t, fleetOf(t).Hub.Config), name)
	if err != nil {
		t.Fatalf("read FleetPolicy %s: %v", name, err)
	}
	return fp
}

// rolledOutPolicy reads the FleetPolicy's ClusterPolicy in the cluster; nil when there is none.
func rolledOutPolicy(t *testing.T, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	want := &unstructured.Unstructured{}
	want.SetGroupVersionKind(clusterPolicyGVK)
	want.SetName(name)
	live, err := liveObject(t, cluster, want)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read ClusterPolicy %s in %s: %v", name, cluster, err)
	}
	return live
}

// holds checks, every 200ms for d, that check keeps accepting what it sees: a state that must
// not change (a held wave) is watched for a bounded while, not slept through.
func holds(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// labelDeployment sets the labels on the Deployment in the cluster (e.g. to fix a violation).
func labelDeployment(ctx context.Context, t *testing.T, cluster, ns, name string, labels map[string]string) {
	t.Helper()
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	for k, v := range labels {
		d.Labels[k] = v
	}
	if err := c.Patch(ctx, d, patch); err != nil {
		t.Fatalf("label Deployment %s/%s in %s: %v", ns, name, cluster, err)
	}
}
