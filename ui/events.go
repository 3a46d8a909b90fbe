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
// streams open at once are bounded, in all and per viewer (Options.MaxStreams).
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
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Ready:
		}
		// Let a burst of changes gather into one event: at most one event per Coalesce.
		t := time.NewTimer(s.o.Coalesce)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
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
