package e2e

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/internal/metricsauth"
	"github.com/policyhub/policyhub/ui"
)

// An open change stream of the hub's web view does not outlive its viewer: it ends once the
// viewer's right is taken away (its binding changed), or its token is no longer valid (its
// ServiceAccount deleted), within a recheck: the answers' lifetime, shortened here to 2 s (a
// minute by default). Another viewer's stream stays open meanwhile.
func TestUIInClusterStreamEndsWithItsViewer(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns = "ui-incluster-recheck-e2e"
	createNamespace(ctx, t, hub, ns)
	audiences := []string{metricsauth.DefaultAudience}
	revoked, deleted := uiViewerToken(ctx, t, ns, "revoked", audiences...), uiViewerToken(ctx, t, ns, "deleted", audiences...)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ui-incluster-recheck-e2e"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: applyClusterRole(t, "../config/rbac/hub/ui_viewer_role.yaml")},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "revoked"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "deleted"}}}
	if err := hub.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), binding) })
	const lifetime = 2 * time.Second
	addr, client := startInClusterUI(ctx, t, ui.InCluster{Auth: metricsauth.Options{Audiences: audiences,
		TokenTTL: lifetime, AllowTTL: lifetime, DenyTTL: lifetime}})

	// open opens a change stream; the channel closes when the server ends it.
	open := func(who, token string) <-chan struct{} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: client.Transport}).Do(req) // no timeout: streams stay open
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's change stream: %v %v", who, resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for lines := bufio.NewScanner(resp.Body); lines.Scan(); {
			}
		}()
		return ended
	}
	waitEnd := func(who string, ended <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s's stream still open 30s after %s", who, what)
		}
	}
	revokedEnded, deletedEnded := open("revoked", revoked), open("deleted", deleted)

	binding.Subjects = binding.Subjects[1:]
	if err := hub.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	waitEnd("revoked", revokedEnded, "its binding went")
	select {
	case <-deletedEnded:
		t.Fatal("the other viewer's stream ended too, though it still passes")
	default:
	}

	if err := hub.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted"}}); err != nil {
		t.Fatal(err)
	}
	waitEnd("deleted", deletedEnded, "its ServiceAccount was deleted")
}
