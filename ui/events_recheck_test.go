package ui

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyhub/policyhub/ui/read"
)

// A change stream is checked again while it is open: it goes on while its viewer passes, and ends
// once the check fails (the viewer's token expired or was revoked, its right removed), releasing
// its slot.
func TestEventsStreamEndsWhenTheViewerNoLongerPasses(t *testing.T) {
	src := &staticSource{snap: syntheticFleet(1, 1, time.Now()), broker: read.NewBroker()}
	var checks atomic.Int32
	var revoked atomic.Bool
	s, err := New(src, Options{Guard: open, Coalesce: 10 * time.Millisecond, RecheckEvery: 20 * time.Millisecond,
		Viewer: func(*http.Request) string { return "viewer" }, MaxStreamsPerViewer: 1,
		Recheck: func(*http.Request) error {
			checks.Add(1)
			if revoked.Load() {
				return errors.New("the token is no longer accepted")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/events")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open the stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	deadline := time.Now().Add(10 * time.Second)
	for checks.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rechecks in 10s, want 3", checks.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Still open after passing checks: a change reaches it.
	src.broker.Publish(read.TopicInventory)
	if got := nextData(lines); got != `data: ["inventory"]` {
		t.Fatalf("after passing rechecks: %q, want the change", got)
	}
	revoked.Store(true)
	ended := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream was still open 10s after its viewer stopped passing")
	}
	// Its slot is free again (the viewer's share is one stream).
	revoked.Store(false)
	again, err := http.Get(ts.URL + "/events")
	if err != nil || again.StatusCode != http.StatusOK {
		t.Fatalf("a new stream after the ended one: %v %v", again, err)
	}
	again.Body.Close()
}

func nextData(lines *bufio.Scanner) string {
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "data: ") {
			return l
		}
	}
	return ""
}
