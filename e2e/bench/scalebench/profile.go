package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Profiles of the hub (its --pprof-bind-address), taken when -profile names a directory: they
// say where a measured cost goes, which the table alone cannot.

// saveProfile fetches the hub's named pprof profile (query: e.g. "seconds=30") into
// <-profile dir>/<file>. A profile that cannot be taken is logged, not fatal: it is a diagnosis,
// not a measure.
func (b *bench) saveProfile(ctx context.Context, h *hubProc, profile, query, file string) {
	if b.o.profileDir == "" {
		return
	}
	url := h.pprofURL + profile
	if query != "" {
		url += "?" + query
	}
	if err := fetchTo(ctx, url, filepath.Join(b.o.profileDir, file)); err != nil {
		logf("profile %s: %v", file, err)
		return
	}
	logf("profile: %s", filepath.Join(b.o.profileDir, file))
}

// profileCPU takes a CPU profile of the hub over the next d in the background; the returned
// function waits for it.
func (b *bench) profileCPU(ctx context.Context, h *hubProc, d time.Duration, file string) (wait func()) {
	if b.o.profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.saveProfile(ctx, h, "profile", fmt.Sprintf("seconds=%d", int(d.Seconds())), file)
	}()
	return func() { <-done }
}

func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
