package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster is one kube-apiserver of the fleet: the hub or a managed cluster.
type Cluster struct {
	// Name of the cluster; managed clusters are registered with cluster-gateway under it.
	Name string
	// URL of the apiserver, https://127.0.0.1:<port>.
	URL string
	// Config reaches the apiserver directly as a cluster admin (group system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file equal to Config, for kubectl.
	Kubeconfig string
	// Labels of a managed cluster, as put on its gateway credential Secret.
	Labels map[string]string
	// CAData is the PEM CA bundle that verifies the apiserver.
	CAData []byte
	// KyvernoVersion is the Kyverno the fleet runs in the cluster ("" when none).
	KyvernoVersion string
	// KyvernoMetricsURL is Kyverno's admission controller's Prometheus metrics endpoint
	// (http://127.0.0.1:<port>/metrics; "" when no Kyverno), for the agent's
	// --kyverno-metrics-url: the fleet's Kyverno runs as processes, not Pods it could find.
	KyvernoMetricsURL string
	// GatekeeperVersion is the Gatekeeper the fleet runs in the cluster ("" when none).
	GatekeeperVersion string
	// GatekeeperMetricsURL is Gatekeeper's Prometheus metrics endpoint
	// (http://127.0.0.1:<port>/metrics; "" when no Gatekeeper). It listens on every interface.
	GatekeeperMetricsURL string

	dir       string
	token     string
	apiserver *process
	kyverno   []*process
	// gatekeeper runs with ManagedCluster.Gatekeeper.
	gatekeeper *process
	// controllerManager runs with Options.ControllerManager.
	controllerManager *process
	launch            *launcher
}

// newAdminToken makes a random bearer token for a static token file.
func newAdminToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeKubeconfig writes a kubeconfig equal to cfg (bearer token and CA) to path.
func writeKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

// StopAPIServer stops the cluster's kube-apiserver (the cluster becomes unreachable); its data
// stays in etcd and StartAPIServer brings it back on the same port. It is an outage, not a
// maintenance: the apiserver gets 3 s to drain its watches before it is killed.
func (c *Cluster) StopAPIServer() error {
	return c.apiserver.stop(3 * time.Second)
}

// StartAPIServer starts the cluster's kube-apiserver again after StopAPIServer and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if c.apiserver.running() {
		return nil
	}
	if err := c.apiserver.start(c.launch); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// startFirst starts the cluster's kube-apiserver for the first time and waits until it is ready.
// Its port was free when chosen, but another process may have taken it since: when the apiserver
// exits saying so, it is started again on another port (at most three tries).
func (c *Cluster) startFirst(ctx context.Context, pickPort func() (int, error)) error {
	for attempt := 1; ; attempt++ {
		if err := c.apiserver.start(c.launch); err != nil {
			return err
		}
		err := c.waitReady(ctx)
		if err == nil || attempt == 3 || c.apiserver.running() || !logSays(c.apiserver.logPath, "address already in use") {
			return err
		}
		port, perr := pickPort()
		if perr != nil {
			return fmt.Errorf("%w; and no other port: %v", err, perr)
		}
		if err := c.moveTo(port); err != nil {
			return err
		}
	}
}

// installCRDs installs crds through c. kube-apiserver v1.36.3 can die while CRDs are installed
// in a burst: a nil pointer in kube-openapi's cached spec merger (pkg/cached/cache.go:264, seen
// starting a test's own fleet, 2026-11-26), a race in the apiserver, not in what is applied. An
// apiserver that died so is started again and the CRDs applied again, once.
func (c *Cluster) installCRDs(ctx context.Context, cl client.Client, crds []*unstructured.Unstructured) error {
	err := installCRDs(ctx, cl, crds)
	if err == nil || c.apiserver.running() || !logSays(c.apiserver.logPath, "pkg/cached/cache.go") {
		return err
	}
	if serr := c.StartAPIServer(ctx); serr != nil {
		return fmt.Errorf("%w; started again after kube-openapi's panic, it did not come up: %v", err, serr)
	}
	return installCRDs(ctx, cl, crds)
}

// moveTo makes the (stopped) apiserver serve on port: its flag, URL, Config and kubeconfig.
func (c *Cluster) moveTo(port int) error {
	for i, arg := range c.apiserver.args {
		if strings.HasPrefix(arg, "--secure-port=") {
			c.apiserver.args[i] = "--secure-port=" + strconv.Itoa(port)
		}
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	c.Config.Host = c.URL
	return writeKubeconfig(c.Kubeconfig, c.Name, c.Config)
}

// logSays reports whether the log file contains text.
func logSays(path, text string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), text)
}

// waitReady polls /readyz until the apiserver answers ok.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	httpClient, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return poll(ctx, 200*time.Millisecond, "kube-apiserver "+c.Name, c.apiserver, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, c.URL+"/readyz")
	})
}

// apiserverSetup is what every apiserver of one fleet shares.
type apiserverSetup struct {
	binary       string
	etcdURL      string
	profiling    bool
	serving      keyPair
	servingCA    []byte
	saKey, saPub []byte
	// pickPort chooses an apiserver's port (freePort; a test makes it return a taken one).
	pickPort func() (int, error)
	// Only for the hub: the aggregation layer's front proxy.
	frontProxyCA     []byte
	frontProxyClient keyPair
}

// newCluster writes the files of one apiserver and prepares (does not start) its process.
func newCluster(fleetDir, logDir, name string, hub bool, setup apiserverSetup, l *launcher) (*Cluster, error) {
	dir := filepath.Join(fleetDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	port, err := setup.pickPort()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	token, err := newAdminToken()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	files := map[string][]byte{
		"tls.crt":    setup.serving.certPEM,
		"tls.key":    setup.serving.keyPEM,
		"ca.crt":     setup.servingCA,
		"sa.key":     setup.saKey,
		"sa.pub":     setup.saPub,
		"tokens.csv": []byte(token + ",admin,admin-uid,\"system:masters\"\n"),
	}
	if hub {
		files["front-proxy-ca.crt"] = setup.frontProxyCA
		files["front-proxy-client.crt"] = setup.frontProxyClient.certPEM
		files["front-proxy-client.key"] = setup.frontProxyClient.keyPEM
	}
	for file, data := range files {
		if _, err := writeFile(dir, file, data); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	f := func(file string) string { return filepath.Join(dir, file) }
	args := []string{
		"--etcd-servers=" + setup.etcdURL,
		"--etcd-prefix=/" + name,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--tls-cert-file=" + f("tls.crt"),
		"--tls-private-key-file=" + f("tls.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--token-auth-file=" + f("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://" + name + ".test",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		// No kubelet or controller-manager runs and 127/8 is not a valid endpoint address: the
		// kubernetes Service's endpoints are not maintained.
		"--endpoint-reconciler-type=none",
		"--profiling=" + strconv.FormatBool(setup.profiling),
	}
	if hub {
		args = append(args,
			"--requestheader-client-ca-file="+f("front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file="+f("front-proxy-client.crt"),
			"--proxy-client-key-file="+f("front-proxy-client.key"),
		)
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	cfg := &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: setup.servingCA},
		QPS:             200,
		Burst:           400,
	}
	kubeconfig := f("kubeconfig")
	if err := writeKubeconfig(kubeconfig, name, cfg); err != nil {
		return nil, err
	}
	return &Cluster{
		Name:       name,
		URL:        url,
		Config:     cfg,
		Kubeconfig: kubeconfig,
		CAData:     setup.servingCA,
		dir:        dir,
		token:      token,
		launch:     l,
		apiserver: &process{
			name:    "kube-apiserver " + name,
			path:    setup.binary,
			args:    args,
			logPath: filepath.Join(logDir, "kube-apiserver-"+name+".log"),
		},
	}, nil
}

// startEtcd starts the one etcd every apiserver of the fleet stores its data in (different prefixes).
func startEtcd(ctx context.Context, binary, fleetDir, logDir string, l *launcher) (*process, string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", fmt.Errorf("etcd: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	p := &process{
		name: "etcd",
		path: binary,
		args: []string{
			"--name=fleet",
			"--data-dir=" + filepath.Join(fleetDir, "etcd"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=fleet=" + peerURL,
			"--log-level=warn",
		},
		logPath: filepath.Join(logDir, "etcd.log"),
	}
	if err := p.start(l); err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = poll(ctx, 100*time.Millisecond, "etcd", p, func(ctx context.Context) (bool, error) {
		return getOK(ctx, http.DefaultClient, clientURL+"/health")
	})
	if err != nil {
		return p, "", err
	}
	return p, clientURL, nil
}
