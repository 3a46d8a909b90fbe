package dryruns

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Bounds of a scrape.
const (
	// MaxBody bounds the bytes read of one exposition (Kyverno's, with its histograms, is a few
	// MiB at most in a busy cluster).
	MaxBody = 8 << 20
	// ScrapeTimeout bounds one scrape.
	ScrapeTimeout = 5 * time.Second
)

// NewClient returns the HTTP client scrapes use: no redirects (the URL is the one asked), a
// bounded wait for the response headers, no keep-alive pool to grow.
func NewClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = ScrapeTimeout
	t.MaxIdleConnsPerHost = 1
	return &http.Client{
		Transport:     t,
		Timeout:       ScrapeTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Scrape reads url's exposition, in the Prometheus text format, within ScrapeTimeout and
// MaxBody bytes, and parses it (Parse).
func Scrape(ctx context.Context, client *http.Client, url string) (Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Reading{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return Reading{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Reading{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt != "text/plain" {
		return Reading{}, fmt.Errorf("GET %s: content type %q, want text/plain", url, mt)
	}
	// Parse reads to the end: a body of more than MaxBody bytes leaves nothing of the limit.
	body := &io.LimitedReader{R: resp.Body, N: MaxBody + 1}
	r, err := Parse(body, 0)
	if body.N == 0 {
		return Reading{}, fmt.Errorf("GET %s: more than %d bytes", url, MaxBody)
	}
	if err != nil {
		return Reading{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return r, nil
}
