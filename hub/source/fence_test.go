package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer serves handler and counts the requests it was sent, until the test ends.
func countingServer(t *testing.T, handler http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Only source-controller's storage is fetched from: another host, another port, another scheme,
// credentials or a redirect are refused, and the server they name is never contacted, neither by
// the URL check nor by the client (which checks every dial on its own).
func TestFluxFenceFetchesFromTheStorageOnly(t *testing.T) {
	data := tarball(t, file{name: "p/a.yaml", content: clusterPolicy("a").yaml})
	elsewhere, elsewhereHits := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	storageURL, digest := serve(t, data)
	storageHost := strings.TrimPrefix(storageURL, "http://")
	storageHost = storageHost[:strings.Index(storageHost, "/")]
	redirecting, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/artifact.tar.gz", http.StatusFound)
	}))
	fence, err := NewFluxFence([]string{"flux-system"}, storageHost)
	if err != nil {
		t.Fatal(err)
	}
	redirectFence, err := NewFluxFence([]string{"flux-system"}, redirecting.URL)
	if err != nil {
		t.Fatal(err)
	}
	elsewhereHost := strings.TrimPrefix(elsewhere.URL, "http://")
	_, elsewherePort, _ := strings.Cut(elsewhereHost, ":")
	storageIP, _, _ := strings.Cut(storageHost, ":")

	// The storage itself, through the fence's client.
	if err := fence.CheckURL(storageURL); err != nil {
		t.Fatalf("the storage's own URL: %v", err)
	}
	art, err := FetchArchive(context.Background(), fence.Client(), storageURL, digest, "p", DefaultLimits)
	if err != nil || len(art.Policies) != 1 {
		t.Fatalf("fetch from the storage: %v %v", art, err)
	}

	for _, tc := range []struct {
		name, url string
		fence     FluxFence
		want      string
	}{
		{name: "another host", url: "http://policies.example.com:" + elsewherePort + "/a.tar.gz", want: `host "policies.example.com:` + elsewherePort + `"`},
		{name: "another port of the same host", url: "http://" + storageIP + ":" + elsewherePort + "/a.tar.gz", want: "is not source-controller's storage"},
		{name: "another server", url: elsewhere.URL + "/a.tar.gz", want: "is not source-controller's storage"},
		{name: "https", url: "https://" + storageHost + "/a.tar.gz", want: "is not source-controller's storage"},
		{name: "file", url: "file:///etc/passwd", want: "is not source-controller's storage"},
		{name: "credentials", url: "http://user:secret@" + storageHost + "/a.tar.gz", want: "carries credentials"},
		{name: "the zero fence", url: storageURL, fence: FluxFence{}, want: "fetches no artifacts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fence
			if tc.name == "the zero fence" {
				f = tc.fence
			}
			err := f.CheckURL(tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckURL: %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the URL's password: %v", err)
			}
			// The client refuses another server on its own, before any connection.
			if tc.name != "credentials" && tc.name != "the zero fence" {
				if resp, err := f.Client().Get(tc.url); err == nil {
					resp.Body.Close()
					t.Fatalf("the client fetched %s", tc.url)
				}
			}
		})
	}
	if n := elsewhereHits.Load(); n != 0 {
		t.Fatalf("the other server was sent %d requests", n)
	}

	// A redirect from the storage is not followed.
	_, err = FetchArchive(context.Background(), redirectFence.Client(), redirecting.URL+"/artifact.tar.gz", digest, "p", DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), "follows no redirect") {
		t.Fatalf("a redirect: %v", err)
	}
	if n := elsewhereHits.Load(); n != 0 {
		t.Fatalf("the redirect's target was sent %d requests", n)
	}

	// No proxy from the environment: a proxy would be a second place artifacts come from.
	if tr, ok := fence.Client().Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Errorf("the client's transport %T takes a proxy", fence.Client().Transport)
	}
}

// The storage as Flux advertises it (its Service, with a trailing dot) and as an admin writes
// it; a URL's host is compared without case or trailing dot, its port as the scheme's default.
func TestFluxFenceStorage(t *testing.T) {
	for _, tc := range []struct {
		storage  string
		accepted []string
		refused  []string
	}{
		{storage: DefaultFluxStorage,
			accepted: []string{
				"http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/podinfo/abc.tar.gz",
				"http://Source-Controller.flux-system.svc.cluster.local/x.tar.gz",
				"http://source-controller.flux-system.svc.cluster.local:80/x.tar.gz",
			},
			refused: []string{
				"http://source-controller.flux-system.svc.cluster.local:9090/x.tar.gz",
				"http://source-controller.flux-system.svc.cluster.local.evil.example/x.tar.gz",
				"http://source-controller.team-a.svc.cluster.local/x.tar.gz",
				"https://source-controller.flux-system.svc.cluster.local/x.tar.gz",
				"http://169.254.169.254/latest/meta-data/",
				"//source-controller.flux-system.svc.cluster.local/x.tar.gz",
				"gopher://source-controller.flux-system.svc.cluster.local/x",
			}},
		{storage: "https://storage.internal:8443",
			accepted: []string{"https://storage.internal:8443/a.tar.gz"},
			refused:  []string{"https://storage.internal/a.tar.gz", "http://storage.internal:8443/a.tar.gz"}},
		{storage: "10.0.0.7:9090",
			accepted: []string{"http://10.0.0.7:9090/a.tar.gz"},
			refused:  []string{"http://10.0.0.7/a.tar.gz", "http://10.0.0.8:9090/a.tar.gz"}},
	} {
		f, err := NewFluxFence(nil, tc.storage)
		if err != nil {
			t.Fatalf("%s: %v", tc.storage, err)
		}
		for _, u := range tc.accepted {
			if err := f.CheckURL(u); err != nil {
				t.Errorf("%s: %s refused: %v", tc.storage, u, err)
			}
		}
		for _, u := range tc.refused {
			if err := f.CheckURL(u); err == nil {
				t.Errorf("%s: %s accepted", tc.storage, u)
			}
		}
	}
	for _, bad := range []string{"", "ftp://storage", "http://user@storage", "http://storage/path", "http://storage?x=1", "http://"} {
		if _, err := NewFluxFence(nil, bad); err == nil {
			t.Errorf("storage %q accepted", bad)
		}
	}
	if _, err := NewFluxFence([]string{"Not_A_Namespace"}, DefaultFluxStorage); err == nil {
		t.Error("a namespace that is no DNS label accepted")
	}
}

// A set may name Flux sources in the namespaces allowed only; the error names the field and the
// flag.
func TestFluxFenceNamespaces(t *testing.T) {
	f, err := NewFluxFence([]string{"policyhub-system", "flux-system", "flux-system"}, DefaultFluxStorage)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"policyhub-system", "flux-system"} {
		if err := f.CheckNamespace(ns); err != nil {
			t.Errorf("%s: %v", ns, err)
		}
	}
	err = f.CheckNamespace("team-a")
	if err == nil || !strings.Contains(err.Error(), `spec.source.fluxSource.namespace "team-a"`) || !strings.Contains(err.Error(), "--flux-source-namespaces") ||
		!strings.Contains(err.Error(), `"policyhub-system", "flux-system"`) {
		t.Fatalf("team-a: %v", err)
	}
	if err := (FluxFence{}).CheckNamespace("flux-system"); err == nil {
		t.Error("the zero fence allowed a namespace")
	}
}

// FuzzFluxFenceCheckURL: whatever the URL, one the fence accepts names the storage's scheme, host
// and port and carries no credentials; the check never panics.
func FuzzFluxFenceCheckURL(f *testing.F) {
	for _, seed := range []string{
		"http://source-controller.flux-system.svc.cluster.local./gitrepository/a/b/c.tar.gz",
		"http://source-controller.flux-system.svc.cluster.local:80@evil.example/x",
		"http://evil.example#@source-controller.flux-system.svc.cluster.local/",
		"http://source-controller.flux-system.svc.cluster.local%2eevil.example/",
		"http://[::1]:80/", "HTTP://SOURCE-CONTROLLER.FLUX-SYSTEM.SVC.CLUSTER.LOCAL/",
		"http://source-controller.flux-system.svc.cluster.local\\@evil.example/",
	} {
		f.Add(seed)
	}
	fence, err := NewFluxFence(nil, DefaultFluxStorage)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if fence.CheckURL(raw) != nil {
			return
		}
		req, err := http.NewRequest(http.MethodGet, raw, nil)
		if err != nil {
			return // never sent
		}
		u := req.URL
		if u.Scheme != "http" || canonicalHost(u.Hostname()) != DefaultFluxStorage || effectivePort(u) != "80" || u.User != nil {
			t.Fatalf("accepted %q: scheme %q host %q port %q user %v", raw, u.Scheme, u.Hostname(), u.Port(), u.User)
		}
	})
}
