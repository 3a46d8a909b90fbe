// Package registrytest serves a real OCI distribution registry (go-containerregistry's, in
// process) behind basic auth, for the tests of what reads policy artifacts.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
)

// Serve serves a registry that takes only user's requests, until the test ends; it returns the
// registry's host (127.0.0.1:port, spoken to over plain HTTP).
func Serve(t testing.TB, user, password string) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="registrytest"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Keychain gives every registry the credentials user and password.
func Keychain(user, password string) authn.Keychain {
	return keychain{authn.FromConfig(authn.AuthConfig{Username: user, Password: password})}
}

type keychain struct{ authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.Authenticator, nil }
