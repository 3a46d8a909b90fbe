package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/hub/gateway"
)

// A black hole accepts a connection and then says nothing: a read, and a TLS handshake, wait until
// the client's own deadline. Close ends the connections it holds.
func TestDarkBlackHole(t *testing.T) {
	bh, err := StartBlackHole()
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	u, err := url.Parse(bh.URL())
	if err != nil || u.Scheme != "https" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
		t.Fatalf("URL() = %q, want https://127.0.0.1:<port>", bh.URL())
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Fatalf("connect to the black hole: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read from the black hole: %d bytes, err %v; want a timeout", n, err)
	}

	tlsConn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Fatalf("second connect to the black hole: %v", err)
	}
	defer tlsConn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = tls.Client(tlsConn, &tls.Config{InsecureSkipVerify: true}).HandshakeContext(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TLS handshake with the black hole: %v, want the client's deadline", err)
	}

	if err := bh.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The connection it held now ends: the read returns at once (EOF or reset), not at the deadline.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("read after Close: %v, want the connection closed", err)
	}
	if _, err := net.DialTimeout("tcp", u.Host, 2*time.Second); err == nil {
		t.Errorf("the black hole still accepts connections after Close")
	}
	if err := bh.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A refusing URL refuses connections at once, and each call gives another port.
func TestDarkRefusingURL(t *testing.T) {
	first, err := RefusingURL()
	if err != nil {
		t.Fatal(err)
	}
	second, err := RefusingURL()
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Errorf("RefusingURL gave %s twice", first)
	}
	for _, raw := range []string{first, second} {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() != "127.0.0.1" {
			t.Fatalf("RefusingURL() = %q, want https://127.0.0.1:<port>", raw)
		}
		_, err = net.DialTimeout("tcp", u.Host, 2*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("connect to %s: %v, want connection refused", raw, err)
		}
		// Nobody else can be given the port while it is held.
		if l, err := net.Listen("tcp", u.Host); err == nil {
			l.Close()
			t.Errorf("listen on %s succeeded: the refusing port is not held", u.Host)
		}
	}
}

// Clusters added with AddClusterSecret are served by the gateway: one pointing at a real
// apiserver answers, one at a refusing URL fails with the refusal, one at a black hole never
// answers; SetClusterEndpoint brings a dark one back and RemoveClusterSecret makes it unknown.
func TestDarkClusterSecrets(t *testing.T) {
	t.Parallel()
	f := startTestFleet(t, Options{Managed: []ManagedCluster{{Name: "cluster-1", Labels: map[string]string{"env": "real"}}}})
	ctx := context.Background()
	cl := f.Managed[0]

	if err := f.AddClusterSecret(ctx, "virtual-1", cl.URL, cl.Name, map[string]string{"env": "virtual"}); err != nil {
		t.Fatal(err)
	}
	secret, err := kubernetesClient(t, f.Hub.Config).CoreV1().Secrets(f.SecretNamespace).Get(ctx, "virtual-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if secret.Labels["env"] != "virtual" || secret.Labels[gateway.CredentialTypeLabel] != gateway.CredentialTypeServiceAccountToken {
		t.Errorf("labels of virtual-1: %v", secret.Labels)
	}
	if string(secret.Data["endpoint"]) != cl.URL || len(secret.Data["token"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
		t.Errorf("data of virtual-1: endpoint %q, token %d bytes, ca.crt %d bytes", secret.Data["endpoint"], len(secret.Data["token"]), len(secret.Data["ca.crt"]))
	}
	waitGateway(t, f, "virtual-1", "answers /version", func(status int, err error) bool { return err == nil && status == http.StatusOK })

	// Replacing: the same name, another endpoint and labels.
	refusing, err := RefusingURL()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AddClusterSecret(ctx, "virtual-1", refusing, cl.Name, map[string]string{"env": "refusing"}); err != nil {
		t.Fatal(err)
	}
	waitGateway(t, f, "virtual-1", "answers with the refusal", func(status int, err error) bool {
		return err != nil && strings.Contains(err.Error(), "connection refused")
	})
	if secret, err = kubernetesClient(t, f.Hub.Config).CoreV1().Secrets(f.SecretNamespace).Get(ctx, "virtual-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if secret.Labels["env"] != "refusing" || len(secret.Labels) != 2 {
		t.Errorf("labels of the replaced virtual-1: %v, want env=refusing and the credential type only", secret.Labels)
	}

	bh, err := StartBlackHole()
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	if err := f.SetClusterEndpoint(ctx, "virtual-1", bh.URL()); err != nil {
		t.Fatal(err)
	}
	// Until the gateway sees the new endpoint it answers at once (the refusal); then it waits.
	waitGateway(t, f, "virtual-1", "stays silent (black hole)", func(status int, err error) bool {
		return errors.Is(err, context.DeadlineExceeded)
	})
	if bh.Accepted() == 0 {
		t.Errorf("the gateway waited, but never connected to the black hole")
	}

	if err := f.SetClusterEndpoint(ctx, "virtual-1", cl.URL); err != nil {
		t.Fatal(err)
	}
	waitGateway(t, f, "virtual-1", "answers /version again", func(status int, err error) bool { return err == nil && status == http.StatusOK })

	if err := f.RemoveClusterSecret(ctx, "virtual-1"); err != nil {
		t.Fatal(err)
	}
	waitGateway(t, f, "virtual-1", "is unknown", func(status int, err error) bool {
		return err != nil && strings.Contains(err.Error(), "no such cluster")
	})
	if err := f.RemoveClusterSecret(ctx, "virtual-1"); err != nil {
		t.Errorf("removing a removed cluster: %v", err)
	}
}

// waitGateway GETs /version of cluster through the hub's aggregation layer (each try waits at most
// 2 s for an answer) until done says the answer is the one wanted, for at most 30 s.
func waitGateway(t *testing.T, f *Fleet, cluster, what string, done func(status int, err error) bool) {
	t.Helper()
	cfg, err := gateway.ClusterConfig(f.Hub.Config, cluster)
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lastStatus int
	var lastErr error
	err = poll(ctx, 200*time.Millisecond, cluster+" "+what, f.gateway, func(ctx context.Context) (bool, error) {
		lastStatus, lastErr = getVersion(ctx, httpClient, cfg.Host+"/version")
		return done(lastStatus, lastErr), nil
	})
	if err != nil {
		t.Fatalf("%v; last answer: status %d, %v", err, lastStatus, lastErr)
	}
}

// getVersion sends GET url, waiting at most 2 s: the status, and as error the body of an answer
// other than 200 or the client's error (context.DeadlineExceeded when nothing answered).
func getVersion(ctx context.Context, httpClient *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, errors.New(resp.Status + ": " + string(body))
	}
	return resp.StatusCode, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
