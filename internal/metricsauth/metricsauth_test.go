package metricsauth

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
)

// fakeAPIServer answers TokenReviews (tokens maps a token to its user) and SubjectAccessReviews
// (allowed holds "user verb path"), and records the reviews it was asked.
type fakeAPIServer struct {
	tokens  map[string]authenticationv1.UserInfo
	allowed map[string]bool
	// audiences maps a token to the audiences it is valid for (none listed: the apiserver's own,
	// apiAudience); an apiserver that ignores audiences (ignoreAudiences) answers without any.
	audiences       map[string][]string
	ignoreAudiences bool
	// gate, when set, holds every review until it is closed.
	gate chan struct{}

	mu                  sync.Mutex
	fail                bool
	tokenReviews        []authenticationv1.TokenReviewSpec
	accessReviews       []authorizationv1.SubjectAccessReviewSpec
	inFlight, maxFlight int
}

// apiAudience is the fake apiserver's own audience: a token issued without another is for it.
const apiAudience = "https://kubernetes.default.svc"

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.inFlight-- }()
	if f.fail {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		var review authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.tokenReviews = append(f.tokenReviews, review.Spec)
		if user, ok := f.tokens[review.Spec.Token]; ok {
			valid := f.audiences[review.Spec.Token]
			if len(valid) == 0 {
				valid = []string{apiAudience}
			}
			asked := review.Spec.Audiences
			if len(asked) == 0 {
				asked = []string{apiAudience}
			}
			var both []string
			for _, a := range asked {
				if slices.Contains(valid, a) {
					both = append(both, a)
				}
			}
			if len(both) > 0 || f.ignoreAudiences {
				review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user, Audiences: both}
			}
			if f.ignoreAudiences {
				review.Status.Audiences = nil
			}
		}
		_ = json.NewEncoder(w).Encode(review)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var review authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.accessReviews = append(f.accessReviews, review.Spec)
		s := review.Spec
		if s.NonResourceAttributes != nil && f.allowed[s.User+" "+s.NonResourceAttributes.Verb+" "+s.NonResourceAttributes.Path] {
			review.Status.Allowed = true
		} else {
			review.Status.Reason = "no RBAC policy matched"
		}
		_ = json.NewEncoder(w).Encode(review)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPIServer) reviews() (tokens, access int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokenReviews), len(f.accessReviews)
}

// serve serves "metrics" behind the filter, whose reviews the fake apiserver answers.
func serve(t *testing.T, api *fakeAPIServer, now func() time.Time) string {
	t.Helper()
	url, _ := serveWith(t, api, Options{}, now, nil)
	return url
}

// serveWith serves "metrics" behind a guard with options o; page, when set, serves instead.
func serveWith(t *testing.T, api *fakeAPIServer, o Options, now func() time.Time, page http.Handler) (string, *guard) {
	t.Helper()
	apiServer := httptest.NewServer(api)
	t.Cleanup(apiServer.Close)
	// JSON: the fake decodes no protobuf (client-go's default for built-in kinds).
	// No client-side rate limit: the tests count reviews, not wait for them.
	cfg := &rest.Config{Host: apiServer.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}, QPS: -1}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGuard(cfg, hc, o, now)
	if err != nil {
		t.Fatal(err)
	}
	// The page names whom the filter let in (UserFrom), as the web view's stream cap needs it.
	if page == nil {
		page = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, ok := UserFrom(r.Context())
			if !ok {
				http.Error(w, "no user in the request's context", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "metrics for "+user.Username)
		})
	}
	h, err := g.filter(logr.Discard(), page)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, g
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// A scraper whose token the apiserver accepts and whose user may get /metrics reads it; no token
// or an unknown one is 401, a user without the right 403. The reviews carry what RBAC needs.
func TestFilterAuthenticatesAndAuthorizes(t *testing.T) {
	const prom = "system:serviceaccount:monitoring:prometheus"
	api := &fakeAPIServer{
		tokens: map[string]authenticationv1.UserInfo{
			"prom-token":  {Username: prom, UID: "u1", Groups: []string{"system:serviceaccounts"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}},
			"other-token": {Username: "someone"},
		},
		allowed: map[string]bool{prom + " get /metrics": true},
	}
	url := serve(t, api, time.Now)
	for _, c := range []struct {
		what, token, path string
		code              int
		body              string
	}{
		{"no token", "", "/metrics", http.StatusUnauthorized, "Unauthorized"},
		{"an unknown token", "made-up", "/metrics", http.StatusUnauthorized, "Unauthorized"},
		{"a user without the right", "other-token", "/metrics", http.StatusForbidden, "Authorization denied for user someone"},
		{"the reader", "prom-token", "/metrics", http.StatusOK, "metrics for " + prom},
		{"the reader, another path", "prom-token", "/debug", http.StatusForbidden, "Authorization denied for user " + prom},
	} {
		if code, body := get(t, url+c.path, c.token); code != c.code || body != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.what, code, body, c.code, c.body)
		}
	}

	api.mu.Lock()
	defer api.mu.Unlock()
	// No token asks nothing; each token is reviewed once (the reader's second request is cached).
	if n := len(api.tokenReviews); n != 3 {
		t.Errorf("%d TokenReviews, want 3", n)
	}
	var reader *authorizationv1.SubjectAccessReviewSpec
	for i, s := range api.accessReviews {
		if s.User == prom && s.NonResourceAttributes != nil && s.NonResourceAttributes.Path == "/metrics" {
			reader = &api.accessReviews[i]
		}
	}
	if reader == nil || reader.NonResourceAttributes.Verb != "get" || reader.UID != "u1" || len(reader.Groups) != 1 ||
		len(reader.Extra["k"]) != 1 || reader.ResourceAttributes != nil {
		t.Errorf("the reader's SubjectAccessReview %+v: want get on the non-resource URL /metrics, with the user's groups, UID and extra", reader)
	}
}

// The apiserver's answers are kept as controller-runtime's filter keeps them: a token's review
// a minute, an allowed access five minutes, a denied one 30 s. An apiserver that fails is a 500,
// never access.
func TestFilterCachesAndFailsClosed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api := &fakeAPIServer{
		tokens:  map[string]authenticationv1.UserInfo{"prom-token": {Username: "prom"}, "denied-token": {Username: "nobody"}},
		allowed: map[string]bool{"prom get /metrics": true},
	}
	url := serve(t, api, func() time.Time { return now }) + "/metrics"
	want := func(what, token string, code, tokenReviews, accessReviews int) {
		t.Helper()
		if got, _ := get(t, url, token); got != code {
			t.Errorf("%s: %d, want %d", what, got, code)
		}
		if tr, ar := api.reviews(); tr != tokenReviews || ar != accessReviews {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %d and %d", what, tr, ar, tokenReviews, accessReviews)
		}
	}
	want("first scrape", "prom-token", 200, 1, 1)
	want("again", "prom-token", 200, 1, 1)
	now = now.Add(61 * time.Second)
	want("a minute later: the token again", "prom-token", 200, 2, 1)
	now = now.Add(4 * time.Minute)
	want("five minutes after the first: the access again", "prom-token", 200, 3, 2)
	want("denied", "denied-token", 403, 4, 3)
	want("denied again, cached", "denied-token", 403, 4, 3)
	now = now.Add(31 * time.Second)
	want("denied 30s later: asked again", "denied-token", 403, 4, 4)

	api.mu.Lock()
	api.fail = true
	api.mu.Unlock()
	now = now.Add(10 * time.Minute)
	if code, body := get(t, url, "prom-token"); code != http.StatusInternalServerError || body != "Authentication failed" {
		t.Errorf("apiserver failing: %d %q, want 500 Authentication failed", code, body)
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer ": "", "abc": "", "": ""} {
		if got, ok := bearerToken(header); got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", header, got, ok, want)
		}
	}
}

// Made-up tokens cost reviews, never unbounded memory; a full cache evicts what expires first.
func TestTTLCacheIsBounded(t *testing.T) {
	now := time.Now()
	c := newTTLCache[bool](func() time.Time { return now })
	c.put("long", true, time.Hour)
	for i := range 3 * maxEntries {
		c.put(hash(fmt.Sprint(i)), true, time.Minute)
		if n := len(c.entries); n > maxEntries {
			t.Fatalf("%d entries, want at most %d", n, maxEntries)
		}
	}
	if _, ok := c.get("long"); !ok {
		t.Error("the entry that expires last was evicted")
	}
	c.put("k", true, time.Minute)
	if v, ok := c.get("k"); !v || !ok {
		t.Error("the last entry put is not there")
	}
	now = now.Add(time.Minute)
	if _, ok := c.get("k"); ok {
		t.Error("an entry is there after its lifetime")
	}
}
