package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/policyhub/policyhub/ui/read"
)

func TestStreamLimit(t *testing.T) {
	l := newStreamLimit(3, 2)
	a1, err := l.open("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.open("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.open("alice"); err == nil {
		t.Error("a third stream of alice's was let in, past her share of 2")
	}
	if _, err := l.open("bob"); err != nil {
		t.Errorf("bob's first stream: %v", err)
	}
	if _, err := l.open("carol"); err == nil {
		t.Error("a fourth stream was let in, past the server's 3")
	}
	a1()
	a1() // a second release gives nothing back twice
	if _, err := l.open("carol"); err != nil {
		t.Errorf("carol after alice closed one: %v", err)
	}
	if _, err := l.open("dave"); err == nil {
		t.Error("a double release freed two slots")
	}
	if l.total != 3 || len(l.viewer) != 3 {
		t.Errorf("total %d over %d viewers, want 3 over 3", l.total, len(l.viewer))
	}
}

// One viewer opening change streams in a loop runs out of its own share: the next is refused
// with 429 naming the user, another viewer still gets its stream, and a closed stream frees its
// slot.
func TestEventsBoundedPerViewer(t *testing.T) {
	src := &staticSource{snap: syntheticFleet(1, 1, time.Now()), broker: read.NewBroker()}
	s, err := New(src, Options{Guard: open, Viewer: func(r *http.Request) string { return r.Header.Get("X-Test-User") },
		MaxStreamsPerViewer: 2, Coalesce: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	stream := func(ctx context.Context, user string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/events", nil)
		req.Header.Set("X-Test-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			return resp.StatusCode, string(body[:n]), nil
		}
		return resp.StatusCode, "", nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, closeFirst := context.WithCancel(ctx)
	for i, c := range []context.Context{first, ctx} {
		if code, _, err := stream(c, "alice"); err != nil || code != http.StatusOK {
			t.Fatalf("alice's stream %d: %d %v", i+1, code, err)
		}
	}
	code, body, err := stream(ctx, "alice")
	if err != nil || code != http.StatusTooManyRequests || !strings.Contains(body, `user "alice" has 2 change streams open`) {
		t.Errorf("alice's third stream: %d %q %v, want 429 naming her", code, body, err)
	}
	if code, _, err := stream(ctx, "bob"); err != nil || code != http.StatusOK {
		t.Errorf("bob's stream while alice is at her share: %d %v", code, err)
	}
	closeFirst()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err = stream(ctx, "alice")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's closed stream did not free its slot: %d %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
