package ui

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/policyhub/policyhub/internal/metricsauth"
	"github.com/policyhub/policyhub/ui/read"
)

// InCluster serves the web view in the hub (policyhub-hub --ui-bind-address): HTTPS, each request's bearer token
// authenticated and authorized by the hub's apiserver as /metrics is (TokenReview for the
// audiences of Auth, then a SubjectAccessReview for GET on the page's path as a non-resource URL:
// the ClusterRole policyhub-ui-viewer grants them); a change stream is checked again while open. It reads the hub with the hub's own identity, so whoever may
// view it sees the whole fleet: grant it as you would read access to every declaration's status.
type InCluster struct {
	// Addr is where to listen; CertDir holds tls.crt and tls.key ("": self-signed at start).
	Addr, CertDir string
	// GatewaySecretNamespace is cluster-gateway's credential-Secret namespace (the inventory).
	GatewaySecretNamespace string
	// Config reaches the hub as the hub: it reads the fleet, and reviews the viewers' tokens.
	Config *rest.Config
	Log    logr.Logger
	// MaxStreams and MaxStreamsPerViewer bound the change streams open at once, in all and per
	// authenticated user (Options'; zero: the defaults).
	MaxStreams, MaxStreamsPerViewer int
	// Auth configures the viewers' authentication: the audiences their tokens must be issued for,
	// the reviews in flight, the answers' lifetimes. A change stream is checked again every
	// Auth.TokenTTL (a minute by default), and ends when its viewer no longer passes.
	Auth metricsauth.Options
}

// NeedLeaderElection: every replica serves the view.
func (u *InCluster) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (u *InCluster) Start(ctx context.Context) error {
	tlsConfig, err := u.tlsConfig(ctx)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(u.Config)
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	filter, err := metricsauth.New(u.Config, httpClient, u.Auth)
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	guard := func(next http.Handler) http.Handler {
		h, err := filter(u.Log, next)
		if err != nil { // metricsauth's filter never fails: refuse everything if it ever does
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "authentication unavailable", http.StatusInternalServerError)
			})
		}
		return h
	}
	reader, err := read.Start(ctx, read.Options{Config: u.Config, GatewaySecretNamespace: u.GatewaySecretNamespace, Log: u.Log})
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	recheckEvery := u.Auth.TokenTTL
	if recheckEvery <= 0 {
		recheckEvery = metricsauth.DefaultTokenTTL
	}
	server, err := New(reader, Options{Guard: guard, Log: u.Log, Viewer: authenticatedUser,
		MaxStreams: u.MaxStreams, MaxStreamsPerViewer: u.MaxStreamsPerViewer,
		Recheck: func(r *http.Request) error { return metricsauth.Recheck(r.Context()) }, RecheckEvery: recheckEvery})
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", u.Addr)
	if err != nil {
		return fmt.Errorf("web view: listen on %s: %w", u.Addr, err)
	}
	// No WriteTimeout: a page's change stream (Server-Sent Events) stays open.
	srv := &http.Server{Handler: server, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	u.Log.Info("serving the web view", "address", listener.Addr().String())
	if err := srv.ServeTLS(listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web view: %w", err)
	}
	return nil
}

// tlsConfig is the certificate in certDir (reloaded when it changes), else a self-signed one
// made at start; HTTP/1.1 only, as /metrics.
func (u *InCluster) tlsConfig(ctx context.Context) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if u.CertDir != "" {
		watcher, err := certwatcher.New(filepath.Join(u.CertDir, "tls.crt"), filepath.Join(u.CertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("--ui-cert-dir: %w", err)
		}
		go func() {
			if err := watcher.Start(ctx); err != nil {
				u.Log.Error(err, "web view: certificate watcher stopped")
			}
		}()
		c.GetCertificate = watcher.GetCertificate
		return c, nil
	}
	host, _ := os.Hostname()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("web view: self-signed certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("web view: self-signed certificate: %w", err)
	}
	c.Certificates = []tls.Certificate{cert}
	return c, nil
}

// authenticatedUser is the user name the guard authenticated: each user has its own share of
// change streams, whichever of its tokens it uses.
func authenticatedUser(r *http.Request) string {
	if user, ok := metricsauth.UserFrom(r.Context()); ok {
		return user.Username
	}
	return ""
}
