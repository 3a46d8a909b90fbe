package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// watchedPaths are the collections the hub's apiserver stores the shapes' objects in, watched
// across namespaces as the hub's informers watch summaries and Leases: every write is encoded
// and sent to each watch, which is part of what a write costs a hub that watches.
func watchedPaths() []string {
	paths := []string{"/apis/policyhub.io/v1alpha1/policyreportsummaries", "/api/v1/configmaps", "/apis/coordination.k8s.io/v1/leases"}
	for _, c := range crdCopies {
		paths = append(paths, "/apis/"+c.group+"/v1alpha1/policyreportsummaries")
	}
	return paths
}

// watchers holds n watches on each of watchedPaths, reading and discarding what arrives (no
// decoding: the bench's own CPU stays out of the apiserver's way) and counting the bytes.
type watchers struct {
	received atomic.Int64
	errs     chan error
}

func startWatchers(ctx context.Context, c rest.Interface, n int) (*watchers, error) {
	w := &watchers{errs: make(chan error, n*len(watchedPaths()))}
	for _, path := range watchedPaths() {
		for range n {
			// No deadline: the watch lasts the run; the apiserver's own watch timeout ends it
			// after its 30-60 minutes at the earliest, far beyond a run.
			stream, err := c.Get().AbsPath(path).Param("watch", "true").Timeout(0).Stream(ctx)
			if err != nil {
				return nil, fmt.Errorf("watch %s: %w", path, err)
			}
			go func() {
				defer stream.Close()
				_, err := io.Copy(countingDiscard{&w.received}, stream)
				if ctx.Err() == nil {
					w.errs <- fmt.Errorf("watch %s ended: %v", path, err)
				}
			}()
		}
	}
	return w, nil
}

// ended is the first watch that ended before the run did, if any.
func (w *watchers) ended() error {
	if w == nil {
		return nil
	}
	select {
	case err := <-w.errs:
		return err
	default:
		return nil
	}
}

func (w *watchers) bytes() int64 {
	if w == nil {
		return 0
	}
	return w.received.Load()
}

type countingDiscard struct{ n *atomic.Int64 }

func (c countingDiscard) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
