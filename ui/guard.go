package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// TokenCookie holds the local token once the browser has traded the URL's token for it.
const TokenCookie = "policyhub-ui"

// NewToken returns a random one-time token for LocalGuard.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// LocalGuard admits the browser the user opened the printed URL in, and no one else. 127.0.0.1
// is not private: other local users can connect, and a web page can reach it through a DNS name
// that resolves there (DNS rebinding). So a request must name the listener's own address as its
// Host (a rebinding page's Host is its own name), and carry the token: in the URL once, which
// is traded for an HttpOnly, SameSite=Strict cookie and removed from the address bar, then in
// that cookie.
func LocalGuard(addr net.Addr, token string) func(http.Handler) http.Handler {
	port := ""
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	}
	hosts := []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(hosts, r.Host) {
				http.Error(w, "this address serves only http://127.0.0.1:"+port+"/", http.StatusForbidden)
				return
			}
			if q := r.URL.Query(); q.Has("token") {
				if !equal(q.Get("token"), token) {
					http.Error(w, "wrong token: open the URL `kubectl policyhub ui` printed", http.StatusUnauthorized)
					return
				}
				http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q.Del("token")
				to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
				http.Redirect(w, r, to.String(), http.StatusFound)
				return
			}
			if c, err := r.Cookie(TokenCookie); err != nil || !equal(c.Value, token) {
				http.Error(w, "not signed in: open the URL `kubectl policyhub ui` printed (it carries a one-time token)", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
