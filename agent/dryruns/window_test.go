package dryruns

import (
	"fmt"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	team := Key{Name: "team", Rule: "need-team"}
	team2 := Key{Name: "team", Rule: "other"}
	limits := Key{Namespace: "shop", Name: "limits", Rule: "cpu"}
	type read struct {
		endpoint string
		min      int
		counters map[Key]float64
	}
	tests := []struct {
		name  string
		reads []read
		now   int
		want  map[Key]int64
	}{
		{name: "the first read is the baseline", reads: []read{{"a", 0, map[Key]float64{team: 5}}}, now: 0, want: map[Key]int64{}},
		{
			name:  "increase since the first read, rules summed per policy",
			reads: []read{{"a", 0, map[Key]float64{team: 5}}, {"a", 10, map[Key]float64{team: 7, team2: 1}}},
			now:   10,
			want:  map[Key]int64{{Name: "team"}: 3},
		},
		{
			name:  "a series new on a known endpoint counts from zero",
			reads: []read{{"a", 0, nil}, {"a", 1, map[Key]float64{limits: 2}}},
			now:   1,
			want:  map[Key]int64{{Namespace: "shop", Name: "limits"}: 2},
		},
		{
			name:  "a reset counts the new value",
			reads: []read{{"a", 0, map[Key]float64{team: 5}}, {"a", 5, map[Key]float64{team: 8}}, {"a", 10, map[Key]float64{team: 2}}},
			now:   10,
			want:  map[Key]int64{{Name: "team"}: 5},
		},
		{
			name:  "a series gone and back starts again",
			reads: []read{{"a", 0, map[Key]float64{team: 5}}, {"a", 5, nil}, {"a", 10, map[Key]float64{team: 6}}},
			now:   10,
			want:  map[Key]int64{{Name: "team"}: 6},
		},
		{
			name:  "replicas add up",
			reads: []read{{"a", 0, map[Key]float64{team: 1}}, {"b", 0, map[Key]float64{team: 9}}, {"a", 3, map[Key]float64{team: 2}}, {"b", 3, map[Key]float64{team: 12}}},
			now:   3,
			want:  map[Key]int64{{Name: "team"}: 4},
		},
		{
			name:  "only the last hour",
			reads: []read{{"a", 0, map[Key]float64{team: 0}}, {"a", 10, map[Key]float64{team: 4}}, {"a", 50, map[Key]float64{team: 5}}, {"a", 80, map[Key]float64{team: 7}}},
			now:   80,
			want:  map[Key]int64{{Name: "team"}: 3}, // from the 4 read at 10 (the last at or before 20)
		},
		{
			name:  "nothing in the last hour",
			reads: []read{{"a", 0, map[Key]float64{team: 0}}, {"a", 10, map[Key]float64{team: 4}}, {"a", 71, map[Key]float64{team: 4}}},
			now:   71,
			want:  map[Key]int64{},
		},
		{
			name:  "an endpoint not read for an hour is forgotten",
			reads: []read{{"a", 0, map[Key]float64{team: 0}}, {"a", 1, map[Key]float64{team: 4}}, {"b", 62, nil}},
			now:   62,
			want:  map[Key]int64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			for _, r := range tt.reads {
				w.Observe(r.endpoint, at(r.min), r.counters)
			}
			if got := w.DryRuns(at(tt.now)); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Bounded: samples merge so the count is never larger, and series beyond MaxKeys are not followed.
func TestWindowBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	team := Key{Name: "team", Rule: "r"}
	w := Window{MaxSamples: 4, MaxKeys: 2}
	for i := range 50 {
		w.Observe("a", t0.Add(time.Duration(i)*time.Minute), map[Key]float64{team: float64(i)})
	}
	if n := len(w.endpoints["a"].series[team].samples); n > 4+2 {
		t.Fatalf("%d samples kept, at most 6", n)
	}
	// Merged samples keep the window's count whole when it starts before them...
	if got := w.DryRuns(t0.Add(49 * time.Minute))[Key{Name: "team"}]; got != 49 {
		t.Errorf("got %d dry-runs, want 49", got)
	}
	// ... and never make it larger when it starts among them (the exact count is 19).
	if got := w.DryRuns(t0.Add(90 * time.Minute))[Key{Name: "team"}]; got > 19 {
		t.Errorf("got %d dry-runs from minute 30 on, want at most 19", got)
	}
	w.Observe("a", t0.Add(50*time.Minute), map[Key]float64{team: 50, {Name: "b", Rule: "r"}: 1, {Name: "c", Rule: "r"}: 1})
	if !w.Overflow || w.keys != 2 {
		t.Errorf("overflow %v with %d keys, want true with 2", w.Overflow, w.keys)
	}
}
