package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/policyhub/policyhub/hub/gateway"
)

// Dark clusters: clusters the hub sees (gateway credential Secrets) whose endpoint does not answer
// as a real outage does not answer. A BlackHole accepts TCP connections and then says nothing, so
// a client waits until its own timeout (TLS handshake, request or dial timeout); a RefusingURL
// refuses every connection at once. A stopped kube-apiserver (Cluster.StopAPIServer) is the third
// kind: refused, on the port the cluster used to answer on.
//
// What cluster-gateway v1.9.1 answers for them (measured through the hub and directly): a
// refusing endpoint, at once, HTTP 500 "dial tcp 127.0.0.1:<port>: connect: connection refused";
// a black hole, after 10 s (its TLS handshake timeout), HTTP 500 "net/http: TLS handshake
// timeout" — unless the client gives up first. A Secret written or changed is served within
// about 1.5 s; until then the gateway answers 500 "no such cluster <name>" (or the old endpoint's
// answer).

// BlackHole is a TCP listener on 127.0.0.1 that accepts connections and never answers (a
// black-holed network): every accepted connection is kept open, unread and silent, until Close.
type BlackHole struct {
	l net.Listener

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	done   chan struct{}
}

// StartBlackHole listens on a free port of 127.0.0.1 and accepts connections until Close.
func StartBlackHole() (*BlackHole, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("black hole: %w", err)
	}
	b := &BlackHole{l: l, done: make(chan struct{})}
	go b.accept()
	return b, nil
}

func (b *BlackHole) accept() {
	defer close(b.done)
	for {
		c, err := b.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. too many open files: the connection stays in the backlog, silent too
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns = append(b.conns, c)
		b.mu.Unlock()
	}
}

// URL is the black hole as a cluster endpoint: "https://127.0.0.1:<port>".
func (b *BlackHole) URL() string {
	return "https://" + b.l.Addr().String()
}

// Accepted is how many connections the black hole has accepted so far.
func (b *BlackHole) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// Close stops listening and closes every accepted connection (their clients then see the
// connection end). Safe to call more than once.
func (b *BlackHole) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.done
		return nil
	}
	b.closed = true
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	err := b.l.Close()
	<-b.done
	for _, c := range conns {
		c.Close()
	}
	return err
}

// RefusingURL returns an https URL on 127.0.0.1 where nothing listens: connections are refused.
// The port is held by a bound socket that never listens (and without SO_REUSEADDR), so no other
// program of the machine is given it while this process runs; that socket is never closed (one
// file descriptor per call, for the life of the process).
func RefusingURL() (string, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("refusing URL: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", fmt.Errorf("refusing URL: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", fmt.Errorf("refusing URL: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return "", fmt.Errorf("refusing URL: unexpected socket address %T", sa)
	}
	return "https://127.0.0.1:" + strconv.Itoa(in4.Port), nil
}

// secrets is a typed client of the gateway's credential Secrets on the hub (no discovery: cheap
// to make, so callers adding a thousand clusters need not keep one).
func (f *Fleet) secrets() (typedcorev1.SecretInterface, error) {
	cs, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	return cs.CoreV1().Secrets(f.SecretNamespace), nil
}

// AddClusterSecret writes a cluster-gateway credential Secret named name (a cluster the hub sees)
// whose endpoint is endpoint and whose CA and credentials are copied from the real managed cluster
// like's Secret, with the given labels (plus the gateway's credential-type label). It replaces an
// existing Secret of that name: its labels and data become exactly these. The gateway serves the
// new cluster within about a second.
func (f *Fleet) AddClusterSecret(ctx context.Context, name, endpoint, like string, labels map[string]string) error {
	secrets, err := f.secrets()
	if err != nil {
		return err
	}
	src, err := secrets.Get(ctx, like, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("add cluster %s: credential Secret of %s: %w", name, like, err)
	}
	data := map[string][]byte{}
	for k, v := range src.Data {
		if k != "endpoint" {
			data[k] = v
		}
	}
	data["endpoint"] = []byte(endpoint)
	wantLabels := maps.Clone(labels)
	if wantLabels == nil {
		wantLabels = map[string]string{}
	}
	wantLabels[gateway.CredentialTypeLabel] = src.Labels[gateway.CredentialTypeLabel]
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.SecretNamespace, Labels: wantLabels},
		Type:       src.Type,
		Data:       data,
	}
	_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("add cluster %s: %w", name, err)
		}
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Labels = maps.Clone(wantLabels)
		live.Data = maps.Clone(data)
		live.StringData = nil
		_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("replace cluster %s: %w", name, err)
	}
	return nil
}

// SetClusterEndpoint points the credential Secret of cluster name at endpoint (e.g. back at the
// real apiserver, Cluster.URL, to make a dark cluster answer again; or at a BlackHole to make a
// real one dark). Everything else of the Secret stays.
func (f *Fleet) SetClusterEndpoint(ctx context.Context, name, endpoint string) error {
	secrets, err := f.secrets()
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if live.Data == nil {
			live.Data = map[string][]byte{}
		}
		live.Data["endpoint"] = []byte(endpoint)
		delete(live.StringData, "endpoint")
		_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set endpoint of cluster %s: %w", name, err)
	}
	return nil
}

// RemoveClusterSecret deletes the credential Secret of cluster name: the cluster leaves the fleet
// the hub sees. A Secret already gone is not an error.
func (f *Fleet) RemoveClusterSecret(ctx context.Context, name string) error {
	secrets, err := f.secrets()
	if err != nil {
		return err
	}
	if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove cluster %s: %w", name, err)
	}
	return nil
}
