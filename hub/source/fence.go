package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Flux's defaults: the namespace its controllers and sources usually live in, and the address
// source-controller advertises in its artifacts' URLs (its Service, --storage-adv-addr).
const (
	DefaultFluxNamespace = "flux-system"
	DefaultFluxStorage   = "source-controller.flux-system.svc.cluster.local"
)

// Timeouts of one artifact download: the whole of it, the connection, and the server's first
// answer. A source read has a minute in all (the PolicySet controller's timeout).
const (
	artifactDownloadTimeout = time.Minute
	artifactDialTimeout     = 10 * time.Second
	artifactHeaderTimeout   = 30 * time.Second
)

// FluxFence is where the hub reads Flux sources from. A Flux source's editors decide what a
// PolicySet reading it ships, and whoever may write its status decides the URL the hub fetches:
// so a set may name sources only in the namespaces the hub admin allows, and the hub fetches
// artifacts only from source-controller's storage server, with no redirect and no proxy. The zero
// FluxFence reads nothing.
type FluxFence struct {
	// namespaces a PolicySet's spec.source.fluxSource may be in.
	namespaces []string
	// scheme, host (lower case, without a trailing dot) and port (never empty) of the storage.
	scheme, host, port string
}

// NewFluxFence allows the Flux sources of namespaces (DNS labels) and the artifact URLs of
// storage: "host", "host:port" or "http[s]://host[:port]" (http and its port 80 when not said;
// a trailing dot, as Flux advertises its Service, is the same host).
func NewFluxFence(namespaces []string, storage string) (FluxFence, error) {
	var f FluxFence
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return FluxFence{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(f.namespaces, ns) {
			f.namespaces = append(f.namespaces, ns)
		}
	}
	raw := storage
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return FluxFence{}, fmt.Errorf("storage %q: %w", storage, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Hostname() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return FluxFence{}, fmt.Errorf("storage %q: want host[:port] or http[s]://host[:port], nothing else", storage)
	}
	f.scheme, f.host, f.port = u.Scheme, canonicalHost(u.Hostname()), effectivePort(u)
	return f, nil
}

// Namespaces are the namespaces whose Flux sources a set may read.
func (f FluxFence) Namespaces() []string { return slices.Clone(f.namespaces) }

// Storage names the one server artifacts are fetched from, scheme://host:port.
func (f FluxFence) Storage() string {
	if f.host == "" {
		return "(none)"
	}
	return f.scheme + "://" + net.JoinHostPort(f.host, f.port)
}

// CheckNamespace refuses a Flux source outside the namespaces allowed.
func (f FluxFence) CheckNamespace(ns string) error {
	if slices.Contains(f.namespaces, ns) {
		return nil
	}
	return fmt.Errorf("spec.source.fluxSource.namespace %q: the hub reads Flux sources only in %s (its --flux-source-namespaces): whoever may edit a source decides what the set ships; not read",
		ns, quoteAll(f.namespaces))
}

// CheckURL refuses an artifact URL that is not source-controller's storage: another scheme,
// host or port, or credentials in it. It is checked before any connection is made.
func (f FluxFence) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("status.artifact.url: %w; not fetched", err)
	}
	switch {
	case f.host == "":
		return fmt.Errorf("status.artifact.url %s: this reader fetches no artifacts; not fetched", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("status.artifact.url %s: carries credentials; not fetched", u.Redacted())
	case u.Scheme != f.scheme || canonicalHost(u.Hostname()) != f.host || effectivePort(u) != f.port:
		return fmt.Errorf("status.artifact.url %s: host %q is not source-controller's storage %s (the hub's --flux-artifact-host): not fetched",
			u.Redacted(), u.Host, f.Storage())
	}
	return nil
}

// Client downloads artifacts from the storage and nowhere else: it dials only the storage's
// host and port, follows no redirect, uses no proxy (HTTP_PROXY and the like are ignored: a proxy
// would be a second place artifacts come from), and bounds each download in time.
func (f FluxFence) Client() *http.Client {
	dialer := &net.Dialer{Timeout: artifactDialTimeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: artifactDownloadTimeout,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("redirected to %s: the hub follows no redirect from source-controller's storage; not fetched", req.URL.Redacted())
		},
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil || canonicalHost(host) != f.host || port != f.port {
					return nil, fmt.Errorf("dial %s: not source-controller's storage %s; not connected", addr, f.Storage())
				}
				return dialer.DialContext(ctx, network, addr)
			},
			TLSHandshakeTimeout:   artifactDialTimeout,
			ResponseHeaderTimeout: artifactHeaderTimeout,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   2,
			// The artifact's digest is over the bytes stored: nothing is inflated on the way.
			DisableCompression: true,
		},
	}
}

// ErrNoArtifactClient: a reader without a client reads no Flux artifacts.
var ErrNoArtifactClient = errors.New("this reader downloads no Flux artifacts")

func canonicalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func quoteAll(list []string) string {
	if len(list) == 0 {
		return "no namespace"
	}
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
