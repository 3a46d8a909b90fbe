package ui

import (
	"fmt"
	"net/http"
	"sync"
)

// Defaults of Options.MaxStreams and Options.MaxStreamsPerViewer.
const (
	DefaultMaxStreams          = 256
	DefaultMaxStreamsPerViewer = 16
)

// streamLimit counts the change streams open at once, in all and per viewer: each holds a
// connection, a goroutine and a subscription to the hub's changes, so an authenticated viewer
// opening streams in a loop must run out of its own share, not the server's.
type streamLimit struct {
	max, perViewer int

	mu     sync.Mutex
	total  int
	viewer map[string]int
}

func newStreamLimit(max, perViewer int) *streamLimit {
	return &streamLimit{max: max, perViewer: perViewer, viewer: map[string]int{}}
}

// open takes a stream for viewer; release gives it back. It fails with the reason when the
// viewer's share (perViewer > 0) or the server's is used up.
func (l *streamLimit) open(viewer string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perViewer > 0 && l.viewer[viewer] >= l.perViewer {
		return nil, fmt.Errorf("%s has %d change streams open, the most one viewer may: close a tab of the view", viewerName(viewer), l.perViewer)
	}
	if l.total >= l.max {
		return nil, fmt.Errorf("the view has %d change streams open, the most it serves: try again later", l.max)
	}
	l.total++
	l.viewer[viewer]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			// Entries go when their last stream does: the map holds only viewers with streams open.
			if l.viewer[viewer]--; l.viewer[viewer] == 0 {
				delete(l.viewer, viewer)
			}
		})
	}, nil
}

func viewerName(viewer string) string {
	if viewer == "" {
		return "this viewer"
	}
	return fmt.Sprintf("user %q", viewer)
}

// refuseStream answers a stream over the limit: 429, which also tells the browser's EventSource
// to stop reconnecting (it retries only broken streams), so a refused tab does not hammer.
func refuseStream(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "30")
	http.Error(w, err.Error(), http.StatusTooManyRequests)
}
