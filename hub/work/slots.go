package work

import (
	"context"
	"slices"
	"sync"
)

// Slots bound the passes that plan and write at once across clusters. Waiting passes are let in
// in order, those marked first before all others: a cluster inherited from a replica that died
// (its next change already late by the time membership judged the replica dead) does not queue
// behind a fleet's routine passes.
type Slots struct {
	mu   sync.Mutex
	free int
	// waiting are the passes waiting for a slot: [0] those let in first, [1] the others. A
	// waiter's channel is closed when it is handed a slot.
	waiting [2][]chan struct{}
}

// NewSlots returns n slots (at least one).
func NewSlots(n int) *Slots { return &Slots{free: max(n, 1)} }

// Acquire waits for a slot (ahead of every waiter not first, when first) and returns its
// release, or ctx's error when ctx ends first.
func (s *Slots) Acquire(ctx context.Context, first bool) (release func(), err error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting[0])+len(s.waiting[1]) == 0 {
		s.free--
		s.mu.Unlock()
		return s.release, nil
	}
	q := 1
	if first {
		q = 0
	}
	granted := make(chan struct{})
	s.waiting[q] = append(s.waiting[q], granted)
	s.mu.Unlock()
	select {
	case <-granted:
		return s.release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if i := slices.Index(s.waiting[q], granted); i >= 0 {
		s.waiting[q] = slices.Delete(s.waiting[q], i, i+1)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	// Handed a slot just as ctx ended: pass it on.
	s.release()
	return nil, ctx.Err()
}

// release hands the slot to the next waiter, first ones first, or frees it.
func (s *Slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := range s.waiting {
		if len(s.waiting[q]) > 0 {
			next := s.waiting[q][0]
			s.waiting[q] = slices.Delete(s.waiting[q], 0, 1)
			close(next)
			return
		}
	}
	s.free++
}
