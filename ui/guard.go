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
	"sync"
)

// TokenCookie holds the browser's session once it has traded the URL's token for it.
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
// Host (a rebinding page's Host is its own name), and carry the session: the URL's token is
// traded once, by the first browser that opens it, for an HttpOnly, SameSite=Strict cookie
// holding a session secret of its own, and removed from the address bar. The token is spent
// then: whoever reads the URL afterwards (a terminal's scrollback, a shell history, a browser's
// history) is refused; the browser that traded it may open it again (its cookie answers).
func LocalGuard(addr net.Addr, token string) func(http.Handler) http.Handler {
	port := ""
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	}
	hosts := []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port}
	signIn := &signIn{token: token}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(hosts, r.Host) {
				http.Error(w, "this address serves only http://127.0.0.1:"+port+"/", http.StatusForbidden)
				return
			}
			cookie, _ := r.Cookie(TokenCookie)
			signedIn := cookie != nil && signIn.valid(cookie.Value)
			if q := r.URL.Query(); q.Has("token") {
				if !signedIn {
					session, ok := signIn.trade(q.Get("token"))
					if !ok {
						http.Error(w, "this link's token is wrong or was already used (it is good for one browser, once): run `kubectl policyhub ui` again", http.StatusUnauthorized)
						return
					}
					http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				}
				q.Del("token")
				to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
				http.Redirect(w, r, to.String(), http.StatusFound)
				return
			}
			if !signedIn {
				http.Error(w, "not signed in: open the URL `kubectl policyhub ui` printed (it carries a one-time token)", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// signIn is the local view's one sign-in: the URL's token, until it is traded for the session.
type signIn struct {
	mu      sync.Mutex
	token   string // "" once traded
	session string // "" until traded
}

// trade spends the token for the session secret, once.
func (s *signIn) trade(token string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == "" || !equal(token, s.token) {
		return "", false
	}
	s.token, s.session = "", rand.Text()
	return s.session, true
}

// valid says whether session is the traded session's secret.
func (s *signIn) valid(session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != "" && equal(session, s.session)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
