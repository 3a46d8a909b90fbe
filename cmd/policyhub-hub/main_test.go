package main

import (
	"crypto/tls"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// /metrics is served over HTTPS behind the apiserver's authentication and authorization unless
// --metrics-secure=false; HTTP/2 only with --enable-http2.
func TestMetricsOptions(t *testing.T) {
	secure := metricsOptions(options{metricsAddr: ":8443", metricsSecure: true, metricsCertDir: "/certs"})
	if !secure.SecureServing || secure.FilterProvider == nil || secure.CertDir != "/certs" || secure.BindAddress != ":8443" {
		t.Errorf("secure: %+v", secure)
	}
	tlsConfig := &tls.Config{NextProtos: []string{"h2"}}
	for _, opt := range secure.TLSOpts {
		opt(tlsConfig)
	}
	if !slices.Equal(tlsConfig.NextProtos, []string{"http/1.1"}) {
		t.Errorf("ALPN %v, want http/1.1 only", tlsConfig.NextProtos)
	}
	if h2 := metricsOptions(options{metricsSecure: true, enableHTTP2: true}); len(h2.TLSOpts) != 0 {
		t.Errorf("--enable-http2 still restricts ALPN")
	}
	plain := metricsOptions(options{metricsAddr: "127.0.0.1:8080"})
	if plain.SecureServing || plain.FilterProvider != nil {
		t.Errorf("--metrics-secure=false: %+v", plain)
	}
}

// A --metrics-cert-dir without its certificate and key is refused at start, not replaced by a
// self-signed certificate that scrapers verifying the CA would refuse.
func TestCheckMetricsCertDir(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		o    options
		want string
	}{
		{options{metricsSecure: true}, ""},
		{options{metricsSecure: true, metricsCertDir: dir}, "tls.crt"},
		{options{metricsCertDir: dir}, "needs --metrics-secure"},
	} {
		err := checkMetricsCertDir(c.o)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want an error with %q", c.o, err, c.want)
		}
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkMetricsCertDir(options{metricsSecure: true, metricsCertDir: dir}); err != nil {
		t.Errorf("with both files: %v", err)
	}
}

// --metrics-auth-audiences and --ui-auth-audiences are comma-separated lists; empty is none (the
// apiserver's own audience).
func TestAudiences(t *testing.T) {
	for flag, want := range map[string][]string{"policyhub": {"policyhub"}, " a, b ,,": {"a", "b"}, "": nil, ",": nil} {
		if got := audiences(flag); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", flag, got, want)
		}
	}
}

// --summary-budget and --heartbeat-budget are positive, finite rates; a refusal names the flag.
func TestCheckBudgets(t *testing.T) {
	for _, c := range []struct {
		summary, heartbeat float64
		want               string
	}{
		{10, 10, ""},
		{0.5, 1000, ""},
		{0, 10, "--summary-budget 0 must be"},
		{-1, 10, "--summary-budget -1 must be"},
		{math.NaN(), 10, "--summary-budget NaN must be"},
		{math.Inf(1), 10, "--summary-budget +Inf must be"},
		{10, 0, "--heartbeat-budget 0 must be"},
		{10, math.Inf(-1), "--heartbeat-budget -Inf must be"},
		{10, math.NaN(), "--heartbeat-budget NaN must be"},
	} {
		err := checkBudgets(options{summaryBudget: c.summary, heartbeatBudget: c.heartbeat})
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v, %v: %v, want an error with %q", c.summary, c.heartbeat, err, c.want)
		}
	}
}
