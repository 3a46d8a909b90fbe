package work

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

// The warnings a cluster's apiserver answers a request with (admission webhooks' among them) are
// logged once per cluster; a request that needs them (see kyvernoIgnoresExceptions) also collects
// them through its context.

type warningsKey struct{}

// warnings are the warnings collected for the requests of one context.
type warnings struct {
	mu       sync.Mutex
	messages []string
}

// collectingWarnings returns a context whose requests' warnings are collected into w.
func collectingWarnings(ctx context.Context) (context.Context, *warnings) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.messages...)
}

// warningCollector hands every warning to next, and to the collector of the request's context,
// when it has one.
type warningCollector struct {
	next rest.WarningHandlerWithContext
}

func (h warningCollector) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok {
		w.mu.Lock()
		// Bounded: a cluster could answer with any number of warnings.
		if len(w.messages) < 16 {
			w.messages = append(w.messages, text)
		}
		w.mu.Unlock()
	}
	h.next.HandleWarningHeaderWithContext(ctx, code, agent, text)
}
