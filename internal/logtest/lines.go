package logtest

import (
	"context"
	"strings"
	"sync"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Lines collects the Info lines (up to V(Verbosity), V(0) by default) and errors logged through
// a context made by Context.
type Lines struct {
	Verbosity int

	mu    sync.Mutex
	lines []string
}

// Context is ctx with a logger that records into l.
func (l *Lines) Context(ctx context.Context) context.Context {
	return log.IntoContext(ctx, funcr.New(func(_, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: l.Verbosity}))
}

// Count is how many lines contain substr.
func (l *Lines) Count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// String is every line, one a line, for a failure's message.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
