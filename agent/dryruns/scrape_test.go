package dryruns

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A scrape reads what a hostile endpoint sends within its bounds, or fails saying why; it
// never follows a redirect elsewhere.
func TestScrapeHostileEndpoints(t *testing.T) {
	good := header + seriesLine("true", "-", "team", "need-team", "fail", "enforce", "admission_request", 2) + "\n"
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the scrape followed a redirect")
		_, _ = w.Write([]byte(good))
	}))
	defer elsewhere.Close()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{"Kyverno's exposition", func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
				t.Errorf("Accept %q, want the text format", r.Header.Get("Accept"))
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
			_, _ = w.Write([]byte(good))
		}, ""},
		{"more than MaxBody bytes", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			line := []byte("# " + strings.Repeat("x", 1000) + "\n")
			for written := 0; written <= MaxBody; written += len(line) {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}, "more than 8388608 bytes"},
		{"an error status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) }, "403 Forbidden"},
		{"another format", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.google.protobuf")
			_, _ = w.Write([]byte{0x0a, 0x01})
		}, "want text/plain"},
		{"a redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, elsewhere.URL, http.StatusFound) }, "302 Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r, err := Scrape(context.Background(), NewClient(), srv.URL)
			if tt.wantErr == "" {
				if err != nil || r.DryRuns[Key{Name: "team", Rule: "need-team"}] != 2 {
					t.Fatalf("got %v, %v", r.DryRuns, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// An endpoint that cannot be read leaves the dry-runs uncounted, saying why, and counts none.
func TestCounterUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	url := srv.URL
	srv.Close()
	res := NewCounter().Count(context.Background(), []string{url}, time.Now())
	if res.Counted || !strings.Contains(res.NotCounted, "Kyverno's metrics unreadable") || len(res.DryRuns) != 0 {
		t.Errorf("got %+v, want not counted, saying why, and no dry-runs", res)
	}
	if res := NewCounter().Count(context.Background(), nil, time.Now()); res.Counted || !strings.Contains(res.NotCounted, "no Kyverno admission controller metrics endpoint") {
		t.Errorf("no endpoint: %+v", res)
	}
}

// A Kyverno whose metricsExposure drops the dry_run label cannot tell dry-runs apart: said so.
func TestCounterWithoutTheDryRunLabel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(header + strings.Replace(seriesLine("true", "-", "team", "r", "fail", "enforce", "admission_request", 2), `dry_run="true",`, "", 1) + "\n"))
	}))
	defer srv.Close()
	res := NewCounter().Count(context.Background(), []string{srv.URL}, time.Now())
	if res.Counted || !strings.Contains(res.NotCounted, "has no dry_run label") {
		t.Errorf("got %+v, want not counted for want of the dry_run label", res)
	}
}
