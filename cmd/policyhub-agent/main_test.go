package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseMetricsURLs(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "http://127.0.0.1:8000/metrics", want: "[http://127.0.0.1:8000/metrics]"},
		{in: " http://a:8000/metrics, https://[fd00::1]:8000/metrics ,", want: "[http://a:8000/metrics https://[fd00::1]:8000/metrics]"},
		{in: "file:///etc/passwd", wantErr: "not an http(s) URL"},
		{in: "http://user:secret@a:8000/metrics", wantErr: "no credentials"},
		{in: "/metrics", wantErr: "with a host"},
		{in: strings.Repeat("http://a/,", maxMetricsURLs+1), wantErr: "at most 16"},
	}
	for _, tt := range tests {
		got, err := parseMetricsURLs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("%q: %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}
