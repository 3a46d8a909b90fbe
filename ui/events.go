package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// events streams the hub's changes to a page (Server-Sent Events): an event "changed" whose data
// is the topics that changed, at most one event per Coalesce. A quiet fleet sends nothing. The
// streams open at once are bounded, in all and per viewer (Options.MaxStreams), and, with
// Options.Recheck, each is checked again while it is open.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	viewer := ""
	if s.o.Viewer != nil {
		viewer = s.o.Viewer(r)
	}
	release, err := s.streams.open(viewer)
	if err != nil {
		s.o.Log.V(1).Info("change stream refused", "viewer", viewer, "reason", err.Error())
		refuseStream(w, err)
		return
	}
	defer release()
	sub := s.src.Subscribe()
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	// The browser reconnects by itself after a broken stream; 5 s spares a restarting server.
	if _, err := fmt.Fprint(w, "retry: 5000\n\n"); err != nil {
		return
	}
	flusher.Flush()
	// A stream outlives the check its request passed: with Recheck, it is checked again every
	// RecheckEvery, and ends when the viewer no longer passes (token expired or revoked, right
	// removed). The browser then reconnects, and its new request is refused.
	var recheck <-chan time.Time
	if s.o.Recheck != nil {
		ticker := time.NewTicker(s.o.RecheckEvery)
		defer ticker.Stop()
		recheck = ticker.C
	}
	// wait waits for ready or fired (either may be nil), and says false when the stream is to end.
	wait := func(ready <-chan struct{}, fired <-chan time.Time) bool {
		for {
			select {
			case <-r.Context().Done():
				return false
			case <-recheck:
				if err := s.o.Recheck(r); err != nil {
					s.o.Log.V(1).Info("change stream closed", "viewer", viewer, "reason", err.Error())
					return false
				}
			case <-ready:
				return true
			case <-fired:
				return true
			}
		}
	}
	for {
		if !wait(sub.Ready, nil) {
			return
		}
		// Let a burst of changes gather into one event: at most one event per Coalesce.
		t := time.NewTimer(s.o.Coalesce)
		if !wait(nil, t.C) {
			t.Stop()
			return
		}
		topics := sub.Take()
		if len(topics) == 0 {
			continue
		}
		slices.Sort(topics)
		data, err := json.Marshal(topics)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: changed\ndata: %s\n\n", data); err != nil {
			return
		}
		flusher.Flush()
	}
}
