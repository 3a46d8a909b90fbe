package dryruns

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// concurrentScrapes bounds the endpoints read at once.
const concurrentScrapes = 4

// Result is what a Counter knows of dry-run refusals over its window.
type Result struct {
	// DryRuns counts, per legacy policy (Key.Rule empty), its dry-run refusals over the window.
	DryRuns map[Key]int64
	// Counted: every endpoint was read and marks dry-runs; when false, NotCounted says why and
	// DryRuns holds what the endpoints read could tell (a lower bound).
	Counted    bool
	NotCounted string
	// Present: some endpoint exposes MetricName (absent, no admission was evaluated yet, or
	// Kyverno's metricsExposure disables the metric).
	Present bool
}

// Counter reads the admission controller's endpoints when asked, and keeps their counters in a
// Window. Safe for concurrent use; one Count at a time.
type Counter struct {
	client *http.Client
	mu     sync.Mutex
	window Window
}

// NewCounter returns a Counter over DefaultSpan.
func NewCounter() *Counter {
	return &Counter{client: NewClient()}
}

// Count reads every endpoint once (at most MaxEndpoints, concurrentScrapes at a time, each
// bounded by ScrapeTimeout) and returns the dry-runs over the window ending at now.
func (c *Counter) Count(ctx context.Context, urls []string, now time.Time) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := Result{Counted: true}
	fail := func(format string, args ...any) {
		if res.Counted {
			res.Counted, res.NotCounted = false, fmt.Sprintf(format, args...)
		}
	}
	if len(urls) == 0 {
		fail("no Kyverno admission controller metrics endpoint found (a running Pod with an IP, or --kyverno-metrics-url)")
	}
	urls = urls[:min(len(urls), MaxEndpoints)]
	// A few at a time, so unanswering endpoints cost a few ScrapeTimeouts, not one each, and
	// at most that many bodies are read at once.
	readings := make([]Reading, len(urls))
	errs := make([]error, len(urls))
	slots := make(chan struct{}, concurrentScrapes)
	var wg sync.WaitGroup
	for i, url := range urls {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			readings[i], errs[i] = Scrape(ctx, c.client, url)
		})
	}
	wg.Wait()
	for i, url := range urls {
		r, err := readings[i], errs[i]
		if err != nil {
			fail("Kyverno's metrics unreadable: %v", err)
			continue
		}
		res.Present = res.Present || r.Present
		if r.Unlabelled > 0 {
			fail("%s at %s has no %s label (Kyverno's metricsExposure drops it?)", MetricName, url, labelDryRun)
		}
		c.window.Observe(url, now, r.DryRuns)
	}
	if c.window.Overflow {
		fail("more than %d policy rules to follow", orDefault(c.window.MaxKeys, DefaultMaxKeys))
	}
	res.DryRuns = c.window.DryRuns(now)
	return res
}
