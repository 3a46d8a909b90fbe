package hubconfig

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// hub accepts one bearer token at a time and records the tokens it was sent.
type hub struct {
	mu       sync.Mutex
	accepted string
	seen     []string
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, r.Header.Get("Authorization"))
	if r.Header.Get("Authorization") != "Bearer "+h.accepted {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	_, _ = w.Write([]byte("{}"))
}

func (h *hub) accept(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.accepted = token
}

func (h *hub) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[len(h.seen)-1]
}

// writeKubeconfig writes a kubeconfig for server (verified with ca, when given) with the given
// credentials, replacing the file in one rename, as the kubelet updates a mounted Secret.
func writeKubeconfig(t *testing.T, path, server string, ca []byte, auth *clientcmdapi.AuthInfo) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["agent"] = auth
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "agent"}
	cfg.CurrentContext = "hub"
	tmp := path + ".new"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, cfg *rest.Config) int {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(cfg.Host + "/apis")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// serve starts a TLS hub (clientcmd gives credentials to https servers only) accepting token,
// and writes a kubeconfig for it with token.
func serve(t *testing.T, token string) (*hub, string, func(token string)) {
	t.Helper()
	h := &hub{accepted: token}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	rotate := func(token string) {
		auth := &clientcmdapi.AuthInfo{Token: token}
		if token == "" {
			auth = &clientcmdapi.AuthInfo{}
		}
		writeKubeconfig(t, path, srv.URL, ca, auth)
	}
	rotate(token)
	return h, path, rotate
}

// A token rotated in the kubeconfig is used without a restart: the hub's first 401 to the old
// token makes the agent read the file again, and its next request carries the new token.
func TestLoadUsesARotatedTokenAfterA401(t *testing.T) {
	h, path, rotate := serve(t, "one")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if code := get(t, cfg); code != http.StatusOK || h.last() != "Bearer one" {
		t.Fatalf("first request: %d with %q", code, h.last())
	}
	rotate("two")
	h.accept("two") // the old token expired
	if code := get(t, cfg); code != http.StatusUnauthorized || h.last() != "Bearer one" {
		t.Fatalf("the request right after the rotation: %d with %q, want the cached token refused", code, h.last())
	}
	if code := get(t, cfg); code != http.StatusOK || h.last() != "Bearer two" {
		t.Fatalf("after the 401: %d with %q, want the rotated token", code, h.last())
	}
}

// Once a token has been used for its period, the file is read again: a rotated token is used
// before the old one is refused, and a rewrite without a token keeps the last good one.
func TestLoadRereadsTheTokenAfterItsPeriod(t *testing.T) {
	h, path, rotate := serve(t, "one")
	// Every token read is already at the end of its period.
	cfg, err := load(path, func() time.Time { return time.Now().Add(-rereadPeriod) })
	if err != nil {
		t.Fatal(err)
	}
	if code := get(t, cfg); code != http.StatusOK || h.last() != "Bearer one" {
		t.Fatalf("first request: %d with %q", code, h.last())
	}
	rotate("two")
	if code := get(t, cfg); code != http.StatusUnauthorized || h.last() != "Bearer two" {
		t.Fatalf("after the period: %d with %q, want the rotated token sent", code, h.last())
	}
	h.accept("two")
	rotate("") // a broken rewrite
	if code := get(t, cfg); code != http.StatusOK || h.last() != "Bearer two" {
		t.Errorf("after a rewrite without a token: %d with %q, want the last good token", code, h.last())
	}
}

// Each read of the kubeconfig's token is what the file says now.
func TestKubeconfigTokenReadsTheFileEachTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	k := &kubeconfigToken{path: path, now: time.Now}
	for _, token := range []string{"one", "two"} {
		writeKubeconfig(t, path, "https://hub.example:6443", nil, &clientcmdapi.AuthInfo{Token: token})
		got, err := k.Token()
		if err != nil || got.AccessToken != token || got.Expiry.IsZero() {
			t.Errorf("token %v (%v), want %q with an expiry", got, err, token)
		}
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeKubeconfig(t, path, "https://hub.example:6443", nil, &clientcmdapi.AuthInfo{TokenFile: tokenFile})
	if got, err := k.Token(); err != nil || got.AccessToken != "three" {
		t.Errorf("a kubeconfig turned to tokenFile: %v (%v), want three", got, err)
	}
	writeKubeconfig(t, path, "https://hub.example:6443", nil, &clientcmdapi.AuthInfo{})
	if _, err := k.Token(); err == nil {
		t.Error("a kubeconfig without a token gave one")
	}
}

// Credentials client-go already refreshes, or that are not tokens, are left as they are.
func TestLoadLeavesOtherCredentialsToClientGo(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string]*clientcmdapi.AuthInfo{
		"tokenFile":          {TokenFile: tokenFile},
		"basic, no token":    {Username: "u", Password: "p"},
		"exec plugin":        {Exec: &clientcmdapi.ExecConfig{Command: "get-token", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}},
		"nothing but a name": {},
	} {
		path := filepath.Join(dir, "kubeconfig")
		writeKubeconfig(t, path, "https://hub.example:6443", nil, auth)
		cfg, err := Load(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.WrapTransport != nil {
			t.Errorf("%s: the transport is wrapped", name)
		}
		if name == "tokenFile" && (cfg.BearerTokenFile != tokenFile || cfg.BearerToken != "t") {
			t.Errorf("tokenFile: %q %q, want client-go's file source", cfg.BearerTokenFile, cfg.BearerToken)
		}
	}
}
