package work

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Passes waiting for a slot are let in in order, those marked first before the others; a waiter
// whose context ends leaves the line without taking a slot.
func TestSlotsLetFirstPassesIn(t *testing.T) {
	ctx := context.Background()
	s := NewSlots(1)
	held, err := s.Acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	// wait queues name once s has it in line (the test reads the line, not the clock).
	wait := func(name string, first bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.Acquire(ctx, first)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			release()
		}()
	}
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.Lock()
			got := len(s.waiting[0]) + len(s.waiting[1])
			s.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait("routine-1", false)
	queued(1)
	wait("routine-2", false)
	queued(2)
	cancelled, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := s.Acquire(cancelled, true); gaveUp <- err }()
	queued(3)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a waiter whose context ended got a slot")
	}
	queued(2)
	wait("inherited", true)
	queued(3)
	held()
	wg.Wait()
	if want := []string{"inherited", "routine-1", "routine-2"}; !slices.Equal(order, want) {
		t.Errorf("let in %v, want %v", order, want)
	}
	// Every slot came back: one can be taken at once.
	release, err := s.Acquire(ctx, false)
	if err != nil || s.free != 0 {
		t.Fatalf("slot after all released: %v (free %d)", err, s.free)
	}
	release()
}
