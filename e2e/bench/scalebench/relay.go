package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// leaseRelay gives every cluster name of the benchmark its own sync Lease. The names share 16
// real apiservers, and a real apiserver holds one sync Lease (policyhub-system/policyhub-sync):
// without the relay hundreds of names take turns on one Lease, which a real fleet (a Lease per
// cluster) never does. Each name gets an endpoint of its own, https://<a loopback address of
// its own>:<the relay's port> (all of 127.0.0.0/8 is loopback on Linux), where the relay tells it
// apart by the connection's local address and reverse-proxies to the name's real apiserver,
// renaming the sync Lease to policyhub-sync-<name> on the way in and back on the way out. Every
// other request passes as it came (the names of one apiserver still share its objects).
//
// The relay serves a certificate per address, signed by a CA of its own that the names'
// credential Secrets carry; the gateway's bearer token passes through to the real apiserver,
// which checks it as it did before.
type leaseRelay struct {
	port     int
	caPEM    []byte
	ca       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	backends []*relayBackend
	server   *http.Server

	mu     sync.RWMutex
	routes map[netip.Addr]relayName
	byName map[string]netip.Addr
	certs  map[netip.Addr]*tls.Certificate

	// What went through, for the report.
	requests, renamed, failed atomic.Int64
}

// relayName is one cluster name behind the relay.
type relayName struct {
	name, lease string
	backend     *relayBackend
}

// relayBackend is one real apiserver.
type relayBackend struct {
	target *url.URL
	proxy  *httputil.ReverseProxy
}

// maxRelayNames bounds the addresses handed out: 127.1.0.1 onwards, below 127.255.255.255.
const maxRelayNames = 1 << 20

// relayRequestKey carries a relayRequest from the handler to the proxy's hooks.
type relayRequestKey struct{}

// relayRequest is a request's name and whether its answer names the sync Lease.
type relayRequest struct {
	name       relayName
	renameBody bool
}

// startLeaseRelay starts the relay in front of the given real apiservers (URL and CA each).
func startLeaseRelay(apiservers []relayTarget) (*leaseRelay, error) {
	rl := &leaseRelay{routes: map[netip.Addr]relayName{}, byName: map[string]netip.Addr{}, certs: map[netip.Addr]*tls.Certificate{}}
	if err := rl.newCA(); err != nil {
		return nil, err
	}
	for _, a := range apiservers {
		b, err := rl.newBackend(a)
		if err != nil {
			return nil, err
		}
		rl.backends = append(rl.backends, b)
	}
	// One listener for every loopback address: the wildcard, with connections from anywhere but
	// loopback closed before their handshake.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("lease relay: listen: %w", err)
	}
	rl.port = ln.Addr().(*net.TCPAddr).Port
	rl.server = &http.Server{
		Handler:           rl,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rl.certificate},
		// The proxy's failures are counted and answered; their lines are not results.
		ErrorLog: nil,
	}
	go func() { _ = rl.server.ServeTLS(loopbackOnly{ln}, "", "") }()
	return rl, nil
}

// relayTarget is a real apiserver the relay forwards to.
type relayTarget struct {
	url    string
	caData []byte
}

func (rl *leaseRelay) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rl.server.Shutdown(ctx)
	_ = rl.server.Close()
}

// add gives name an endpoint of its own in front of the backend-th apiserver (the same one on
// every call for a name).
func (rl *leaseRelay) add(name string, backend int) (string, error) {
	if backend < 0 || backend >= len(rl.backends) {
		return "", fmt.Errorf("lease relay: no apiserver %d", backend)
	}
	lease, err := ownSyncLease(name)
	if err != nil {
		return "", err
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	addr, ok := rl.byName[name]
	if !ok {
		n := len(rl.byName) + 1
		if n > maxRelayNames {
			return "", fmt.Errorf("lease relay: more than %d names", maxRelayNames)
		}
		addr = netip.AddrFrom4([4]byte{127, byte(1 + n>>16), byte(n >> 8), byte(n)})
		rl.byName[name] = addr
	}
	rl.routes[addr] = relayName{name: name, lease: lease, backend: rl.backends[backend]}
	return "https://" + net.JoinHostPort(addr.String(), strconv.Itoa(rl.port)), nil
}

func (rl *leaseRelay) route(addr net.Addr) (relayName, netip.Addr, bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return relayName{}, netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return relayName{}, netip.Addr{}, false
	}
	ip = ip.Unmap()
	rl.mu.RLock()
	defer rl.mu.RUnlock()
	r, ok := rl.routes[ip]
	return r, ip, ok
}

// ServeHTTP forwards a request of the name the connection's local address belongs to.
func (rl *leaseRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rl.requests.Add(1)
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	name, _, ok := rl.route(local)
	if !ok {
		rl.failed.Add(1)
		http.Error(w, fmt.Sprintf("lease relay: no cluster name at %v", local), http.StatusMisdirectedRequest)
		return
	}
	route := routeLeaseRequest(r.Method, r.URL.Path, name.lease)
	out := r.Clone(context.WithValue(r.Context(), relayRequestKey{}, relayRequest{name: name, renameBody: route.renameBody}))
	out.URL.Path, out.URL.RawPath = route.path, ""
	if route.renameBody {
		// Plain bodies both ways: the response is read to rename it back.
		out.Header.Del("Accept-Encoding")
		if r.Body != nil && r.ContentLength != 0 {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxLeaseBody+1))
			if err == nil && len(body) > maxLeaseBody {
				err = fmt.Errorf("more than %d bytes", maxLeaseBody)
			}
			if err == nil {
				var did bool
				if body, did, err = renameLease(body, r.Header.Get("Content-Type"), policyhubv1.SyncLeaseName, name.lease); did {
					rl.renamed.Add(1)
				}
			}
			if err != nil {
				rl.failed.Add(1)
				http.Error(w, "lease relay: "+err.Error(), http.StatusBadRequest)
				return
			}
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			out.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	name.backend.proxy.ServeHTTP(w, out)
}

func (rl *leaseRelay) newBackend(a relayTarget) (*relayBackend, error) {
	target, err := url.Parse(a.url)
	if err != nil || target.Scheme != "https" || target.Host == "" {
		return nil, fmt.Errorf("lease relay: apiserver URL %q: not https://host:port (%v)", a.url, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.caData) {
		return nil, fmt.Errorf("lease relay: no CA certificate for %s", a.url)
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true, // the names' watches share a few connections
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	b := &relayBackend{target: target}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			path := pr.Out.URL.Path // the routed path: SetURL joins it to the target's
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
		},
		Transport:     transport,
		FlushInterval: -1, // watches: every event at once
		ModifyResponse: func(resp *http.Response) error {
			return rl.renameBack(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return // the client left (a watch ended)
			}
			rl.failed.Add(1)
			http.Error(w, "lease relay: "+err.Error(), http.StatusBadGateway)
		},
	}
	return b, nil
}

// renameBack renames the name's own sync Lease in a response back to the sync Lease the hub
// asked for, so the hub reads what it would read from a cluster of its own.
func (rl *leaseRelay) renameBack(resp *http.Response) error {
	req, ok := resp.Request.Context().Value(relayRequestKey{}).(relayRequest)
	if !ok || !req.renameBody {
		return nil
	}
	if resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLeaseBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("lease relay: read the Lease answer: %w", err)
	}
	if len(body) > maxLeaseBody {
		return fmt.Errorf("lease relay: a Lease answer of more than %d bytes", maxLeaseBody)
	}
	if out, did, err := renameLease(body, resp.Header.Get("Content-Type"), req.name.lease, policyhubv1.SyncLeaseName); err == nil && did {
		body = out
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// certificate serves the certificate of the connection's local address, made at its first
// handshake and kept.
func (rl *leaseRelay) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	_, ip, ok := rl.route(hello.Conn.LocalAddr())
	if !ok {
		return nil, fmt.Errorf("lease relay: no cluster name at %v", hello.Conn.LocalAddr())
	}
	rl.mu.RLock()
	cert, ok := rl.certs[ip]
	rl.mu.RUnlock()
	if ok {
		return cert, nil
	}
	cert, err := rl.issue(ip)
	if err != nil {
		return nil, err
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if c, ok := rl.certs[ip]; ok {
		return c, nil
	}
	rl.certs[ip] = cert
	return cert, nil
}

func (rl *leaseRelay) newCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("lease relay CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "scalebench-lease-relay-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("lease relay CA: %w", err)
	}
	if rl.ca, err = x509.ParseCertificate(der); err != nil {
		return fmt.Errorf("lease relay CA: %w", err)
	}
	rl.caKey, rl.caPEM = key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func (rl *leaseRelay) issue(ip netip.Addr) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("lease relay certificate for %s: %w", ip, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: ip.String()},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip.AsSlice()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, rl.ca, key.Public(), rl.caKey)
	if err != nil {
		return nil, fmt.Errorf("lease relay certificate for %s: %w", ip, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// loopbackOnly closes connections that do not come from loopback: the relay listens on the
// wildcard address to answer every loopback address.
type loopbackOnly struct{ net.Listener }

func (l loopbackOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
			return c, nil
		}
		_ = c.Close()
	}
}
