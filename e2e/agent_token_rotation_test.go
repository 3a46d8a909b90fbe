package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent"
	"github.com/policyhub/policyhub/agent/hubconfig"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// An agent whose hub token is rotated in its kubeconfig file keeps pushing once the old token no
// longer works, without a restart: what replacing its Secret does in a pod (the kubelet rewrites
// the mounted file). The old token is bound to a Secret on the hub, so deleting that Secret ends
// it, as expiry would.
func TestAgentHubTokenRotation(t *testing.T) {
	inParallel(t)
	// An identity of its own on the hub for an agent reading cluster-1, beside the shared agents.
	const cluster = "agent-token-rotation"
	ctx := testContext(t)
	setUpAgentHubAccess(t, cluster)
	hub := directClient(t, fleetOf(t).Hub.Config)
	boundTo := func(prefix string) (*corev1.Secret, *authenticationv1.BoundObjectReference) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: chartTestName(prefix)}}
		if err := hub.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hub.Delete(context.Background(), s) })
		return s, &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: s.Name, UID: s.UID}
	}
	oldSecret, oldRef := boundTo("agent-token-old")
	_, newRef := boundTo("agent-token-new")
	oldToken := agentHubToken(t, cluster, oldRef)

	path := filepath.Join(t.TempDir(), "hub.kubeconfig")
	write := func(token string) {
		cfg := rest.AnonymousClientConfig(fleetOf(t).Hub.Config)
		cfg.BearerToken = token
		// One rename, as the kubelet swaps a Secret volume's files.
		if err := fleet.WriteKubeconfig(path+".new", "hub", cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write(oldToken)
	hubCfg, err := hubconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(log.IntoContext(context.Background(), ctrl.Log.WithName("agent")))
	done := make(chan error, 1)
	go func() {
		// A heartbeat a second: the agent renews its Lease all the time, so a refused token shows at once.
		done <- agent.Run(runCtx, agent.Options{
			Cluster: cluster, Managed: fleetOf(t).Cluster("cluster-1").Config, Hub: hubCfg,
			PushInterval: 500 * time.Millisecond, Heartbeat: time.Second, DiscoveryInterval: 2 * time.Second,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent of %s: %v", cluster, err)
		}
		deleteSummary(t, cluster)
	})
	// The agent renews its Lease every heartbeat (a second): a write with the token in use.
	renewedAfter := func(at time.Time) func() error {
		return func() error {
			lease := &coordinationv1.Lease{}
			if err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: policyhubv1.AgentLeaseName}, lease); err != nil {
				return err
			}
			if r := lease.Spec.RenewTime; r == nil || !r.After(at) {
				return fmt.Errorf("the agent's Lease was renewed at %v, not after %s", r, at.Format(time.RFC3339Nano))
			}
			return nil
		}
	}
	started := time.Now()
	eventually(t, time.Minute, 500*time.Millisecond, "a summary pushed with the first token", func() error {
		_, err := hubSummaryOf(t, cluster)
		return err
	})
	eventually(t, time.Minute, 500*time.Millisecond, "the Lease renewed with the first token", renewedAfter(started))

	// The rotation: a new token in the file, then the old one ends.
	write(agentHubToken(t, cluster, newRef))
	if err := hub.Delete(ctx, oldSecret); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	var endedAt time.Time
	eventually(t, 30*time.Second, 200*time.Millisecond, "the old token refused by the hub", func() error {
		review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: oldToken}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if review.Status.Authenticated {
			return fmt.Errorf("still authenticated as %s", review.Status.User.Username)
		}
		endedAt = time.Now()
		return nil
	})
	eventually(t, 30*time.Second, 500*time.Millisecond, "the Lease renewed with the rotated token, by the same agent", renewedAfter(endedAt))
}
