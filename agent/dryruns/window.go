package dryruns

import (
	"math"
	"time"
)

// Defaults of Window.
const (
	// DefaultSpan is how far back dry-runs are counted: about as long as Kubernetes keeps the
	// Events the refusals are counted from (the apiserver's --event-ttl, 1h by default).
	DefaultSpan = time.Hour
	// DefaultMaxKeys bounds the policy rules followed over every endpoint.
	DefaultMaxKeys = 10000
	// DefaultMaxSamples bounds the samples kept per endpoint and policy rule.
	DefaultMaxSamples = 64
)

// Window keeps, per endpoint (one Kyverno replica: its counters are its own) and policy rule,
// the dry-runs counted so far at the times they were read, and gives their increase over the
// last Span. A counter that goes down was reset (the replica restarted, or Kyverno's
// metricsRefreshInterval began new counters): its new value is all increase, as Prometheus'
// increase() takes it. A rule first seen on an endpoint read before counts from zero at that
// read (Kyverno's series appear at their first increment); on an endpoint read for the first
// time, its counters are the baseline (what came before is of unknown age).
//
// Memory is bounded: at most MaxKeys (endpoint, rule) series, about MaxSamples samples each
// (one per Span/MaxSamples: reads closer together merge, so that the count can only be smaller,
// never larger, by what one such interval at the window's start holds), and endpoints not read
// for Span forgotten. Not safe for concurrent use.
type Window struct {
	// Span is how far back the increase is taken; zero means DefaultSpan.
	Span time.Duration
	// MaxKeys and MaxSamples bound memory; zero means the defaults.
	MaxKeys, MaxSamples int

	endpoints map[string]*endpoint
	keys      int
	// Overflow says series were not followed for want of room (MaxKeys).
	Overflow bool
}

type endpoint struct {
	lastRead time.Time
	series   map[Key]*series
}

// series is one counter: its last raw value, and the increase accumulated since first read
// (monotonic across resets) at the times it changed.
type series struct {
	lastRaw float64
	present bool
	samples []sample
}

type sample struct {
	at  time.Time
	acc float64
}

func (w *Window) span() time.Duration {
	if w.Span <= 0 {
		return DefaultSpan
	}
	return w.Span
}

// Observe records what endpoint's counters read at at.
func (w *Window) Observe(endpointURL string, at time.Time, dryRuns map[Key]float64) {
	if w.endpoints == nil {
		w.endpoints = map[string]*endpoint{}
	}
	maxKeys := orDefault(w.MaxKeys, DefaultMaxKeys)
	ep, known := w.endpoints[endpointURL]
	if !known {
		ep = &endpoint{series: map[Key]*series{}}
		w.endpoints[endpointURL] = ep
	}
	for _, s := range ep.series {
		s.present = false
	}
	for key, v := range dryRuns {
		s := ep.series[key]
		if s == nil {
			if w.keys >= maxKeys {
				w.Overflow = true
				continue
			}
			w.keys++
			s = &series{}
			ep.series[key] = s
			if !known {
				// The first read of the replica: the baseline.
				s.lastRaw, s.present = v, true
				s.samples = []sample{{at: at}}
				continue
			}
			// Appeared since the last read: counted from zero then.
			s.samples = []sample{{at: ep.lastRead}}
		}
		delta := v - s.lastRaw
		if v < s.lastRaw {
			delta = v // a reset
		}
		s.lastRaw, s.present = v, true
		if delta > 0 {
			maxSamples := orDefault(w.MaxSamples, DefaultMaxSamples)
			s.add(at, s.samples[len(s.samples)-1].acc+delta, w.span()/time.Duration(maxSamples), maxSamples)
		}
	}
	for _, s := range ep.series {
		if !s.present {
			s.lastRaw = 0 // gone: when it comes back, it starts again
		}
	}
	ep.lastRead = at
	w.prune(at)
}

// add records the count acc read at at. Samples are at least bucket apart: a read within
// bucket of the last sample (not the baseline) raises that sample's count, keeping its time, so
// a window starting between them counts less, never more. Beyond maxSamples (a clock that
// jumped), the oldest after the baseline is merged the same way.
func (s *series) add(at time.Time, acc float64, bucket time.Duration, maxSamples int) {
	if n := len(s.samples); n >= 2 && at.Sub(s.samples[n-1].at) < bucket {
		s.samples[n-1].acc = acc
		return
	}
	s.samples = append(s.samples, sample{at: at, acc: acc})
	if len(s.samples) > maxSamples+2 {
		s.samples[1].acc = s.samples[2].acc
		s.samples = append(s.samples[:2], s.samples[3:]...)
	}
}

// prune forgets endpoints not read for a span, and the samples no window can start before.
func (w *Window) prune(now time.Time) {
	start := now.Add(-w.span())
	for url, ep := range w.endpoints {
		if ep.lastRead.Before(start) {
			w.keys -= len(ep.series)
			delete(w.endpoints, url)
			continue
		}
		for _, s := range ep.series {
			// Keep the last sample at or before start: the baseline of the window.
			i := 0
			for i+1 < len(s.samples) && !s.samples[i+1].at.After(start) {
				i++
			}
			s.samples = s.samples[i:]
		}
	}
}

// DryRuns is the increase of every endpoint's counters over the span ending at now, per
// policy (the rules summed): each series from its last sample at or before the window's start
// (or its first, if younger) to its latest.
func (w *Window) DryRuns(now time.Time) map[Key]int64 {
	start := now.Add(-w.span())
	out := map[Key]int64{}
	for _, ep := range w.endpoints {
		for key, s := range ep.series {
			if len(s.samples) == 0 {
				continue
			}
			base := s.samples[0]
			for _, x := range s.samples[1:] {
				if x.at.After(start) {
					break
				}
				base = x
			}
			inc := s.samples[len(s.samples)-1].acc - base.acc
			if n := int64(math.Round(inc)); n > 0 {
				policy := Key{Namespace: key.Namespace, Name: key.Name}
				out[policy] = min(out[policy]+n, maxCount)
			}
		}
	}
	return out
}

// orDefault is v, or def when v is not positive (a bound left unset).
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
