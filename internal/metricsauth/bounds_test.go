package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Tokens are reviewed for the hub's audience: a token issued for it is accepted, a full API token
// (the apiserver's own audience) is not, nor is any token when the apiserver does not say which
// audience it checked. Without audiences (the compatible setting) API tokens are accepted.
func TestFilterAsksForTheAudience(t *testing.T) {
	const prom = "prom"
	api := func() *fakeAPIServer {
		return &fakeAPIServer{
			tokens:    map[string]authenticationv1.UserInfo{"bound": {Username: prom}, "full": {Username: prom}},
			audiences: map[string][]string{"bound": {DefaultAudience}},
			allowed:   map[string]bool{prom + " get /metrics": true},
		}
	}
	for _, tc := range []struct {
		what      string
		api       *fakeAPIServer
		audiences []string
		codes     map[string]int
	}{
		{"the hub's audience", api(), []string{DefaultAudience}, map[string]int{"bound": 200, "full": 401}},
		{"no audience: the apiserver's own", api(), nil, map[string]int{"bound": 401, "full": 200}},
		{"an apiserver that ignores audiences", func() *fakeAPIServer { a := api(); a.ignoreAudiences = true; return a }(),
			[]string{DefaultAudience}, map[string]int{"bound": 401, "full": 401}},
	} {
		url, _ := serveWith(t, tc.api, Options{Audiences: tc.audiences}, time.Now, nil)
		for token, want := range tc.codes {
			if code, body := get(t, url+"/metrics", token); code != want {
				t.Errorf("%s, token %s: %d %q, want %d", tc.what, token, code, body, want)
			}
		}
		tc.api.mu.Lock()
		for _, spec := range tc.api.tokenReviews {
			if fmt.Sprint(spec.Audiences) != fmt.Sprint(tc.audiences) {
				t.Errorf("%s: a TokenReview asked for audiences %v, want %v", tc.what, spec.Audiences, tc.audiences)
			}
		}
		tc.api.mu.Unlock()
	}
}

// Reviews in flight are bounded: with every slot taken, a request whose token needs a review is
// answered 503 at once (never asked of the apiserver), while requests presenting a token already
// under review wait for that one review instead of taking a slot.
func TestReviewsAreBoundedAndShared(t *testing.T) {
	gate := make(chan struct{})
	api := &fakeAPIServer{gate: gate}
	url, g := serveWith(t, api, Options{MaxConcurrentReviews: 2}, time.Now, nil)
	// Held reviews are let go before the servers close (cleanups run last first), even on failure.
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open)
	type answer struct {
		token string
		code  int
	}
	answers := make(chan answer, 16)
	var wg sync.WaitGroup
	send := func(token string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := get(t, url+"/metrics", token)
			answers <- answer{token, code}
		}()
	}
	send("made-up-a")
	send("made-up-b")
	waitFor(t, "two reviews at the apiserver", func() bool { api.mu.Lock(); defer api.mu.Unlock(); return api.inFlight == 2 })
	for range 5 {
		send("made-up-a")
	}
	waitFor(t, "seven requests waiting on the two reviews", func() bool { return g.waiting.Load() == 7 })
	for _, token := range []string{"made-up-c", "made-up-d"} {
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s with every slot taken: %v, want 503 at once", token, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with every slot taken: %d (Retry-After %q), want 503 at once", token, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	select {
	case a := <-answers:
		t.Fatalf("%s answered %d while its review was held", a.token, a.code)
	default:
	}
	open()
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", a.token, a.code)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.tokenReviews) != 2 || api.maxFlight > 2 {
		t.Errorf("%d TokenReviews, at most %d at once; want 2 (one per distinct token that got a slot), at most 2", len(api.tokenReviews), api.maxFlight)
	}
}

// Made-up tokens, and an authenticated stranger's made-up paths, fill only the caches of refusals:
// the reader's cached answers stay, and its next scrape asks the apiserver nothing.
func TestMadeUpTokensDoNotEvictUsers(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api := &fakeAPIServer{
		tokens:  map[string]authenticationv1.UserInfo{"prom-token": {Username: "prom"}, "stranger-token": {Username: "stranger"}},
		allowed: map[string]bool{"prom get /metrics": true},
	}
	url, _ := serveWith(t, api, Options{}, func() time.Time { return now }, nil)
	if code, _ := get(t, url+"/metrics", "prom-token"); code != http.StatusOK {
		t.Fatalf("the reader: %d", code)
	}
	for i := range 2*maxEntries + 10 {
		if code, _ := get(t, url+"/metrics", fmt.Sprint("made-up-", i)); code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d: %d, want 401", i, code)
		}
		if code, _ := get(t, fmt.Sprint(url, "/metrics/", i), "stranger-token"); code != http.StatusForbidden {
			t.Fatalf("stranger's path %d: %d, want 403", i, code)
		}
	}
	tokens, access := api.reviews()
	if code, _ := get(t, url+"/metrics", "prom-token"); code != http.StatusOK {
		t.Fatalf("the reader after the flood: %d", code)
	}
	if t2, a2 := api.reviews(); t2 != tokens || a2 != access {
		t.Errorf("the reader's scrape after the flood asked %d TokenReviews and %d SubjectAccessReviews, want none (its answers cached)", t2-tokens, a2-access)
	}
}

// A long request (a stream) is checked again while it runs, through the caches: it passes while
// the token and the right hold (and while their answers are fresh), and no longer once the
// apiserver refuses the token or the right.
func TestRecheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	at := func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); defer clock.Unlock(); now = now.Add(d) }
	api := &fakeAPIServer{
		tokens:  map[string]authenticationv1.UserInfo{"viewer-token": {Username: "viewer"}, "other-token": {Username: "other"}},
		allowed: map[string]bool{"viewer get /events": true, "other get /events": true},
	}
	checks, results := make(chan struct{}), make(chan error)
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case _, ok := <-checks:
				if !ok {
					return
				}
				results <- Recheck(r.Context())
			}
		}
	})
	url, _ := serveWith(t, api, Options{}, at, stream)
	open := func(token string) func() {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("open a stream with %s: %v %v", token, resp, err)
		}
		return func() { cancel(); resp.Body.Close() }
	}
	check := func() error { checks <- struct{}{}; return <-results }

	closeStream := open("viewer-token")
	if err := check(); err != nil {
		t.Errorf("a fresh stream: %v", err)
	}
	api.mu.Lock()
	delete(api.tokens, "viewer-token") // its ServiceAccount deleted, or the token expired
	api.mu.Unlock()
	if err := check(); err != nil {
		t.Errorf("within the token's cache lifetime: %v, want it to pass still", err)
	}
	advance(DefaultTokenTTL + time.Second)
	if err := check(); !errors.Is(err, ErrNoLongerAllowed) || !strings.Contains(err.Error(), "no longer accepts the token") {
		t.Errorf("after the token's lifetime: %v, want ErrNoLongerAllowed", err)
	}
	closeStream()

	closeStream = open("other-token")
	defer closeStream()
	api.mu.Lock()
	delete(api.allowed, "other get /events") // its binding removed
	api.mu.Unlock()
	advance(DefaultAllowTTL + time.Second)
	if err := check(); !errors.Is(err, ErrNoLongerAllowed) || !strings.Contains(err.Error(), "user other may no longer get /events") {
		t.Errorf("after the right's lifetime: %v, want ErrNoLongerAllowed naming the user", err)
	}
	if err := Recheck(context.Background()); !errors.Is(err, ErrNoLongerAllowed) {
		t.Errorf("a request the filter did not let in: %v", err)
	}
}
