// Package registrytest serves a real OCI distribution registry (go-containerregistry's, in
// process) behind basic auth, for the tests of what reads policy artifacts.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
)

// Serve serves a registry that takes only user's requests, until the test ends; it returns the
// registry's host (127.0.0.1:port, spoken to over plain HTTP).
func Serve(t testing.TB, user, password string) string {
	t.Helper()
	return Start(t, user, password).Host
}

// Registry is a registry served until the test ends, which can be taken down and brought back.
type Registry struct {
	// Host is the registry's host (127.0.0.1:port, spoken to over plain HTTP).
	Host string
	down atomic.Bool
}

// Down makes the registry drop every connection without an answer, as an unreachable one;
// Up serves again.
func (r *Registry) Down() { r.down.Store(true) }
func (r *Registry) Up()   { r.down.Store(false) }

// Start serves a registry that takes only user's requests, until the test ends.
func Start(t testing.TB, user, password string) *Registry {
	t.Helper()
	out := &Registry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if out.down.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
				return
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="registrytest"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	out.Host = strings.TrimPrefix(srv.URL, "http://")
	return out
}

// Keychain gives every registry the credentials user and password.
func Keychain(user, password string) authn.Keychain {
	return keychain{authn.FromConfig(authn.AuthConfig{Username: user, Password: password})}
}

type keychain struct{ authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.Authenticator, nil }
