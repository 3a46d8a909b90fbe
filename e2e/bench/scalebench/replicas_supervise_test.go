package main

import (
	"testing"
	"time"
)

func TestRestartBackoff(t *testing.T) {
	for _, tc := range []struct {
		restarts int
		want     time.Duration
	}{
		{-1, time.Second}, // hostile: a negative count waits the first backoff
		{0, time.Second},
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{3, 8 * time.Second},
		{4, 10 * time.Second}, // 16 s, capped
		{5, 10 * time.Second},
		{1 << 30, 10 * time.Second}, // stays capped, and the loop ends at the cap
	} {
		if got := restartBackoff(tc.restarts); got != tc.want {
			t.Errorf("restartBackoff(%d) = %s, want %s", tc.restarts, got, tc.want)
		}
	}
}
