package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/internal/metricsauth"
	"github.com/policyhub/policyhub/ui"
)

// The web view as the hub serves it (--ui-bind-address): every page needs a bearer token the
// hub's real apiserver authenticates (TokenReview) and authorizes for GET on the page's path
// (SubjectAccessReview), as config/rbac/hub's policyhub-ui-viewer ClusterRole grants it. No token,
// or a viewer's token not issued for the view's audience (a full API token): 401; a token whose
// identity is not a viewer: 403; a viewer: the page. Health needs nothing.
func TestUIInClusterNeedsAViewer(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns = "ui-incluster-e2e"
	createNamespace(ctx, t, hub, ns)
	// Tokens for the view's audience (policyhub), as a viewer is told to make them; an API token
	// (the apiserver's own audience) would let whoever reads it act as the viewer on the API.
	token := func(name string) string { return uiViewerToken(ctx, t, ns, name, metricsauth.DefaultAudience) }
	viewer, otherViewer, stranger := token("viewer"), token("other-viewer"), token("stranger")
	viewerAPIToken := uiViewerToken(ctx, t, ns, "viewer")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ui-incluster-e2e-viewer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: applyClusterRole(t, "../config/rbac/hub/ui_viewer_role.yaml")},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "other-viewer"}}}
	if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), binding) })

	// The view, as policyhub-hub runs it, with the fleet's admin as the hub's identity.
	addr, client := startInClusterUI(ctx, t, ui.InCluster{MaxStreamsPerViewer: 2,
		Auth: metricsauth.Options{Audiences: []string{metricsauth.DefaultAudience}}})
	get := func(path, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	for _, tc := range []struct {
		who, token, path string
		code             int
		has              string
	}{
		{"no token", "", "/fleet", http.StatusUnauthorized, ""},
		{"a made-up token", "not-a-token", "/fleet", http.StatusUnauthorized, ""},
		{"a viewer's API token (not for the view's audience)", viewerAPIToken, "/fleet", http.StatusUnauthorized, ""},
		{"a stranger", stranger, "/fleet", http.StatusForbidden, ""},
		{"a stranger", stranger, "/clusters/cluster-1", http.StatusForbidden, ""},
		{"a viewer", viewer, "/fleet", http.StatusOK, `id="grid"`},
		{"a viewer", viewer, "/clusters/cluster-1", http.StatusOK, "Cluster cluster-1"},
	} {
		code, body, err := get(tc.path, tc.token)
		if err != nil || code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("%s, GET %s: %d (%v), want %d with %q; body %.200s", tc.who, tc.path, code, err, tc.code, tc.has, body)
		}
	}
	// A viewer opening change streams in a loop runs out of its own share (2 here), whichever
	// token it uses: the next is refused, naming the user the apiserver authenticated; another
	// viewer still gets its stream.
	openStream := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: client.Transport}).Do(req) // no timeout: streams stay open
		if err != nil {
			t.Fatalf("open a change stream: %v", err)
		}
		if resp.StatusCode == http.StatusOK {
			t.Cleanup(func() { resp.Body.Close() })
			return resp.StatusCode, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	secondToken := token("viewer") // a new token of the same service account
	for i, tok := range []string{viewer, secondToken} {
		if code, body := openStream(tok); code != http.StatusOK {
			t.Fatalf("the viewer's stream %d: %d %s", i+1, code, body)
		}
	}
	if code, body := openStream(viewer); code != http.StatusTooManyRequests ||
		!strings.Contains(body, `user "system:serviceaccount:`+ns+`:viewer" has 2 change streams open`) {
		t.Errorf("the viewer's third stream: %d %q, want 429 naming the viewer", code, body)
	}
	if code, body := openStream(otherViewer); code != http.StatusOK {
		t.Errorf("another viewer's stream while the first is at its share: %d %s", code, body)
	}

	// The view only reads: a viewer's POST changes nothing and is refused.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/fleet", strings.NewReader("x=1"))
	req.Header.Set("Authorization", "Bearer "+viewer)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a viewer's POST: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
}
