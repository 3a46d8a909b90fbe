package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStatusWait(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const coalesce, quiet = 2 * time.Second, 10 * time.Second
	for _, tc := range []struct {
		name       string
		now        time.Duration
		answeredAt time.Time
		pending    int
		want       time.Duration
	}{
		{name: "every cluster answered: write now", now: 100 * time.Millisecond, answeredAt: at(50 * time.Millisecond), pending: 0, want: 0},
		{name: "nobody answered yet: wait up to quiet", now: time.Second, pending: 4, want: 9 * time.Second},
		{name: "nobody answered within quiet: write Pending", now: 11 * time.Second, pending: 4, want: 0},
		{name: "first answer early: coalesce from it", now: time.Second, answeredAt: at(300 * time.Millisecond), pending: 3, want: 1300 * time.Millisecond},
		{name: "first answer late: the others get coalesce from it", now: 5 * time.Second, answeredAt: at(5 * time.Second), pending: 3, want: coalesce},
		{name: "coalesce after the first answer passed: slow clusters shown Pending", now: 7500 * time.Millisecond, answeredAt: at(5 * time.Second), pending: 1, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusWait(at(tc.now), t0, tc.answeredAt, tc.pending, coalesce, quiet); got != tc.want {
				t.Errorf("statusWait = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResultsRoomAnsweredOncePerToken(t *testing.T) {
	var s Room
	key := types.NamespacedName{Name: "a"}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	wanted, answered := s.since(key, "v1", false, t0)
	if !wanted.Equal(t0) || !answered.IsZero() {
		t.Fatalf("new token: wanted %v answered %v; want %v and zero", wanted, answered, t0)
	}
	if _, answered = s.since(key, "v1", true, t0.Add(time.Second)); !answered.Equal(t0.Add(time.Second)) {
		t.Fatalf("first answer at %v, want %v", answered, t0.Add(time.Second))
	}
	if wanted, answered = s.since(key, "v1", true, t0.Add(3*time.Second)); !wanted.Equal(t0) || !answered.Equal(t0.Add(time.Second)) {
		t.Fatalf("later answers moved the times: wanted %v answered %v", wanted, answered)
	}
	if wanted, answered = s.since(key, "v2", false, t0.Add(4*time.Second)); !wanted.Equal(t0.Add(4*time.Second)) || !answered.IsZero() {
		t.Fatalf("a new token must start over: wanted %v answered %v", wanted, answered)
	}
}
