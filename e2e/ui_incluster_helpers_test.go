package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/policyhub/policyhub/ui"
)

// uiViewerToken is an hour's token of the ServiceAccount ns/name on the hub (made if missing),
// issued for audiences (none: the apiserver's own, a full API token).
func uiViewerToken(ctx context.Context, t *testing.T, ns, name string, audiences ...string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := directClient(t, fleetOf(t).Hub.Config).Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600)), Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// startInClusterUI serves the web view as policyhub-hub does (view, with the fleet's admin as the
// hub's identity and a free local address) until the test ends, and returns its address once it
// answers, with an HTTPS client that does not verify its self-signed certificate (these tests
// check who may read, not the certificate).
func startInClusterUI(ctx context.Context, t *testing.T, view ui.InCluster) (string, *http.Client) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	view.Addr = listener.Addr().String()
	listener.Close()
	view.GatewaySecretNamespace, view.Config, view.Log = fleetOf(t).SecretNamespace, fleetOf(t).Hub.Config, ctrl.Log.WithName("ui")
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- view.Start(serveCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the in-cluster view: %v", err)
		}
	})
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	eventually(t, time.Minute, 500*time.Millisecond, "the view serves", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+view.Addr+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %d", resp.StatusCode)
		}
		return nil
	})
	return view.Addr, client
}
