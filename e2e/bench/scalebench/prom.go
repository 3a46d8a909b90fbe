package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metricSet is a parsed /metrics page.
type metricSet []sample

// parseMetrics reads the Prometheus text format (what every component here serves): comments are
// skipped, timestamps ignored; with names, only the series of those metrics are kept. A small
// parser, so the benchmark needs no new dependency.
func parseMetrics(r io.Reader, names ...string) (metricSet, error) {
	var out metricSet
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool {
			return strings.HasPrefix(line, n) && len(line) > len(n) && (line[len(n)] == '{' || line[len(n)] == ' ')
		}) {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				val.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = val.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// sum adds the values of the series named name whose labels include match; found says whether
// any series of that name exists at all.
func (m metricSet) sum(name string, match map[string]string) (total float64, found bool) {
	for _, s := range m {
		if s.name != name {
			continue
		}
		found = true
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
		}
	}
	return total, found
}

// labelValues is the set of values label takes in the series named name.
func (m metricSet) labelValues(name, label string) map[string]bool {
	out := map[string]bool{}
	for _, s := range m {
		if s.name == name {
			if v, ok := s.labels[label]; ok {
				out[v] = true
			}
		}
	}
	return out
}

// scrapeAPIServer reads a kube-apiserver's /metrics as the cluster's admin.
func scrapeAPIServer(ctx context.Context, cfg *rest.Config, names ...string) (metricSet, error) {
	body, err := fleet.APIServerMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseMetrics(body, names...)
}

// percentile is the p-th percentile (0..100) of sorted values, nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
