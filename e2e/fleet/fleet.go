package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
)

// Options say what fleet to start.
type Options struct {
	// Managed are the managed clusters; default: cluster-1 (env=staging) and cluster-2 (env=prod).
	Managed []ManagedCluster
	// SecretNamespace is cluster-gateway's credential-secret namespace; default vela-system.
	SecretNamespace string
	// Profiling serves the kube-apiservers' /debug/pprof (the benchmark profiles them).
	Profiling bool
	// MinimalCRDs installs only policyhub's CRDs on the hub and only Kyverno's ClusterPolicy CRD
	// in the managed clusters (no OCM, KubeVela, openreports, nor Kyverno's other kinds): for
	// fleets of many clusters, where every CRD costs each apiserver memory. Not with Kyverno.
	MinimalCRDs bool
	// KubeVela runs KubeVela's controller (vela-core) on the hub, with all its CRDs and the
	// webservice, topology, deploy and annotations definitions; it deploys through the gateway.
	KubeVela bool
	// ControllerManager runs kube-controller-manager in every cluster (the hub and each managed
	// cluster) with its garbage collector and namespace controller, so ownerReferences cascade
	// and deleted namespaces finish deleting, as in a real cluster.
	ControllerManager bool
	// Flux runs Flux's source-controller on the hub, with its CRDs (GitRepository, OCIRepository,
	// Bucket and the Helm kinds): it serves its artifacts on 127.0.0.1 (Fleet.FluxStorage).
	Flux bool

	// pickPort, in this package's tests, replaces freePort for the apiservers.
	pickPort func() (int, error)
}

// ManagedCluster describes one managed cluster of the fleet.
type ManagedCluster struct {
	// Name of the cluster (its gateway credential Secret's name).
	Name string
	// Labels put on the cluster's gateway credential Secret.
	Labels map[string]string
	// Kyverno runs real Kyverno admission and reports controllers in the cluster.
	Kyverno bool
	// KyvernoReportsArgs are extra flags for the reports controller, e.g. --openreportsEnabled.
	KyvernoReportsArgs []string
	// KyvernoVersion is the Kyverno the cluster runs, with its own CRDs: KyvernoVersion (the
	// default, when empty) or Kyverno116Version.
	KyvernoVersion string
	// Gatekeeper runs OPA Gatekeeper (GatekeeperVersion) in the cluster: its CRDs, namespace and
	// validating webhook, and one process running its webhook, audit, status and generate
	// operations (see gatekeeper.go). Beside Kyverno or instead of it.
	Gatekeeper bool
	// GatekeeperArgs are extra flags for Gatekeeper, e.g. --audit-interval=30 (the last of a
	// flag given twice wins) or --log-denies.
	GatekeeperArgs []string
}

// kyvernoVersion is the Kyverno version the cluster runs (and whose CRDs it serves).
func (m ManagedCluster) kyvernoVersion() string {
	if m.KyvernoVersion == "" {
		return KyvernoVersion
	}
	return m.KyvernoVersion
}

// Fleet is a running local fleet. Stop it when done.
type Fleet struct {
	// Dir holds every file of the fleet (PKI, kubeconfigs, data); it is removed by Stop unless Keep was called.
	Dir string
	// LogDir holds one log file per process.
	LogDir string
	// Hub is the hub cluster; cluster-gateway is registered with it.
	Hub *Cluster
	// Managed are the managed clusters, in the order of Options.Managed.
	Managed []*Cluster
	// GatewayURL is cluster-gateway's own URL, for clients that reach it directly.
	GatewayURL string
	// SecretNamespace is the gateway's credential-secret namespace on the hub.
	SecretNamespace string

	launch  *launcher
	etcd    *process
	gateway *process
	vela    *process
	flux    *process
	// FluxStorage is source-controller's artifact server (http://127.0.0.1:port), with Options.Flux.
	FluxStorage string
	// extra are the programs started with Run.
	extraMu  sync.Mutex
	extra    []*process
	etcdDir  string
	keep     bool
	stopOnce sync.Once
	stopErr  error
}

// DefaultManaged is the fleet a test gets when it names no managed clusters.
func DefaultManaged() []ManagedCluster {
	return []ManagedCluster{
		{Name: "cluster-1", Labels: map[string]string{"env": "staging"}},
		{Name: "cluster-2", Labels: map[string]string{"env": "prod"}},
	}
}

// Start starts a fleet and returns when every part is ready: apiservers serving, CRDs Established,
// the gateway Available through the hub and proxying to every managed cluster, Kyverno's webhooks
// registered and Gatekeeper's webhook answering where asked. On error everything already started
// is stopped; the error names the log directory.
func Start(ctx context.Context, opts Options) (f *Fleet, err error) {
	if len(opts.Managed) == 0 {
		opts.Managed = DefaultManaged()
	}
	if opts.SecretNamespace == "" {
		opts.SecretNamespace = gateway.DefaultSecretNamespace
	}
	var kyvernoVersions []string
	for _, m := range opts.Managed {
		if v := m.kyvernoVersion(); v != KyvernoVersion && v != Kyverno116Version {
			return nil, fmt.Errorf("fleet: cluster %s: Kyverno %s is not built (%s or %s)", m.Name, v, KyvernoVersion, Kyverno116Version)
		}
		if m.Kyverno && !slices.Contains(kyvernoVersions, m.kyvernoVersion()) {
			kyvernoVersions = append(kyvernoVersions, m.kyvernoVersion())
		}
	}
	withGatekeeper := slices.ContainsFunc(opts.Managed, func(m ManagedCluster) bool { return m.Gatekeeper })
	b, err := findBinaries(kyvernoVersions, opts.KubeVela, opts.ControllerManager, opts.Flux, withGatekeeper)
	if err != nil {
		return nil, err
	}
	// The directory name is what hack/leftovers.sh looks for in command lines.
	dir, err := os.MkdirTemp("", "policyhub-fleet-")
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f = &Fleet{Dir: dir, LogDir: filepath.Join(dir, "logs"), SecretNamespace: opts.SecretNamespace, launch: newLauncher(),
		// POLICYHUB_KEEP_FLEET=1 keeps every fleet's files and logs, passing tests' too.
		keep: os.Getenv("POLICYHUB_KEEP_FLEET") != ""}
	defer func() {
		if err != nil {
			f.Keep()
			_ = f.Stop()
			err = fmt.Errorf("%w (logs: %s)", err, f.LogDir)
			f = nil
		}
	}()
	if err := os.MkdirAll(f.LogDir, 0o755); err != nil {
		return f, fmt.Errorf("fleet: %w", err)
	}

	servingCA, err := newCertAuthority("policyhub-fleet-ca")
	if err != nil {
		return f, err
	}
	frontProxyCA, err := newCertAuthority("policyhub-fleet-front-proxy-ca")
	if err != nil {
		return f, err
	}
	setup := apiserverSetup{binary: b.kubeAPIServer, servingCA: servingCA.certPEM, frontProxyCA: frontProxyCA.certPEM, profiling: opts.Profiling, pickPort: freePort}
	if opts.pickPort != nil {
		setup.pickPort = opts.pickPort
	}
	if setup.serving, err = servingCA.serving("kube-apiserver", "kubernetes", "kubernetes.default.svc"); err != nil {
		return f, err
	}
	if setup.frontProxyClient, err = frontProxyCA.client("front-proxy-client"); err != nil {
		return f, err
	}
	if setup.saKey, setup.saPub, err = newServiceAccountKey(); err != nil {
		return f, err
	}

	f.etcdDir = etcdDataDir(dir)
	if f.etcd, setup.etcdURL, err = startEtcd(ctx, b.etcd, f.etcdDir, f.LogDir, f.launch); err != nil {
		return f, err
	}
	if f.Hub, err = newCluster(dir, f.LogDir, "hub", true, setup, f.launch); err != nil {
		return f, err
	}
	for _, m := range opts.Managed {
		c, err := newCluster(dir, f.LogDir, m.Name, false, setup, f.launch)
		if err != nil {
			return f, err
		}
		c.Labels = maps.Clone(m.Labels)
		f.Managed = append(f.Managed, c)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range f.all() {
		g.Go(func() error { return c.startFirst(gctx, setup.pickPort) })
	}
	if err := g.Wait(); err != nil {
		return f, err
	}
	if opts.ControllerManager {
		for _, c := range f.all() {
			if err := f.startControllerManager(b.kubeControllerManager, c); err != nil {
				return f, err
			}
		}
	}

	hubSources, managedSources := hubCRDs, managedCRDs
	if opts.KubeVela {
		hubSources = slices.DeleteFunc(slices.Clone(hubSources), func(s crdSource) bool { return s.module == kubeVelaModule })
		hubSources = append(hubSources, kubeVelaCRDs...)
	}
	if opts.Flux {
		hubSources = append(slices.Clone(hubSources), fluxCRDs...)
	}
	if opts.MinimalCRDs {
		if opts.KubeVela || opts.Flux {
			return f, errors.New("fleet: MinimalCRDs leaves out CRDs KubeVela and Flux need: not with them")
		}
		if slices.ContainsFunc(opts.Managed, func(m ManagedCluster) bool { return m.Kyverno }) {
			return f, errors.New("fleet: MinimalCRDs leaves out CRDs Kyverno needs: not with Kyverno")
		}
		hubSources, managedSources = minimalHubCRDs, minimalManagedCRDs
	}
	hubCRDObjs, err := loadCRDs(ctx, hubSources)
	if err != nil {
		return f, err
	}
	managedCRDObjs, err := loadCRDs(ctx, managedSources)
	if err != nil {
		return f, err
	}
	var kyverno116CRDObjs []*unstructured.Unstructured
	if slices.ContainsFunc(opts.Managed, func(m ManagedCluster) bool { return m.kyvernoVersion() == Kyverno116Version }) {
		if opts.MinimalCRDs {
			return f, errors.New("fleet: MinimalCRDs installs Kyverno 1.19's ClusterPolicy CRD only: not with KyvernoVersion")
		}
		if kyverno116CRDObjs, err = loadCRDs(ctx, kyverno116CRDs); err != nil {
			return f, err
		}
	}
	var gatekeeperCRDObjs []*unstructured.Unstructured
	if withGatekeeper {
		if gatekeeperCRDObjs, err = loadCRDs(ctx, gatekeeperCRDs); err != nil {
			return f, err
		}
	}
	hub, err := client.New(f.Hub.Config, client.Options{})
	if err != nil {
		return f, fmt.Errorf("hub client: %w", err)
	}
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := f.Hub.installCRDs(gctx, hub, hubCRDObjs); err != nil {
			return fmt.Errorf("hub CRDs: %w", err)
		}
		if err := installAdmission(gctx, hub); err != nil {
			return fmt.Errorf("hub admission policies: %w", err)
		}
		if err := f.startGateway(gctx, b.clusterGateway, servingCA); err != nil {
			return err
		}
		for _, c := range f.Managed {
			if err := f.registerCluster(gctx, hub, c); err != nil {
				return err
			}
		}
		for _, c := range f.Managed {
			if err := f.waitProxied(gctx, c); err != nil {
				return err
			}
		}
		if opts.Flux {
			if err := f.startSourceController(gctx, b); err != nil {
				return err
			}
		}
		if opts.KubeVela {
			return f.startKubeVela(gctx, b)
		}
		return nil
	})
	for i, c := range f.Managed {
		m := opts.Managed[i]
		g.Go(func() error {
			cl, err := client.New(c.Config, client.Options{})
			if err != nil {
				return fmt.Errorf("cluster %s: %w", c.Name, err)
			}
			crds := managedCRDObjs
			if m.kyvernoVersion() == Kyverno116Version {
				crds = kyverno116CRDObjs
			}
			if m.Gatekeeper {
				crds = append(slices.Clone(crds), gatekeeperCRDObjs...)
			}
			if err := c.installCRDs(gctx, cl, crds); err != nil {
				return fmt.Errorf("cluster %s CRDs: %w", c.Name, err)
			}
			if m.Kyverno {
				if err := f.startKyverno(gctx, b, c, m.kyvernoVersion(), m.KyvernoReportsArgs); err != nil {
					return err
				}
			}
			if m.Gatekeeper {
				return f.startGatekeeper(gctx, b.gatekeeper, servingCA, c, m.GatekeeperArgs)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return f, err
	}
	return f, nil
}

// etcdDataDir puts etcd's data on tmpfs where there is one (etcd fsyncs every write, and the
// fleet's data need not survive the test), named after the fleet's directory.
func etcdDataDir(fleetDir string) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d := filepath.Join("/dev/shm", filepath.Base(fleetDir)+"-etcd")
		if err := os.Mkdir(d, 0o700); err == nil {
			return d
		}
	}
	return filepath.Join(fleetDir, "etcd")
}

// Cluster returns the managed cluster with that name, or nil.
func (f *Fleet) Cluster(name string) *Cluster {
	for _, c := range f.Managed {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (f *Fleet) all() []*Cluster {
	var all []*Cluster
	if f.Hub != nil {
		all = append(all, f.Hub)
	}
	return append(all, f.Managed...)
}

// Keep keeps the fleet's directory (and its logs) after Stop, e.g. when a test failed.
// Run starts an extra program (e.g. policyhub's own binaries in the demo) as part of the fleet:
// its output goes to LogDir/<name>.log, it dies with the process that started the fleet, and
// Stop stops it first.
func (f *Fleet) Run(name, path string, args ...string) error {
	p := &process{name: name, path: path, args: args, logPath: filepath.Join(f.LogDir, name+".log")}
	if err := p.start(f.launch); err != nil {
		return err
	}
	f.extraMu.Lock()
	defer f.extraMu.Unlock()
	f.extra = append(f.extra, p)
	return nil
}

// WriteKubeconfig writes a kubeconfig for cfg (server, CA and bearer token) to path.
func WriteKubeconfig(path, name string, cfg *rest.Config) error {
	return writeKubeconfig(path, name, cfg)
}

func (f *Fleet) Keep() { f.keep = true }

// Stop ends every process of the fleet (Kyverno, Gatekeeper and the gateway, then the apiservers,
// then etcd: apiservers hang when etcd goes first), checks that none is left, and removes the
// fleet's files unless Keep was called. Safe to call more than once.
func (f *Fleet) Stop() error {
	f.stopOnce.Do(func() { f.stopErr = f.stop() })
	return f.stopErr
}

func (f *Fleet) stop() error {
	var errs []error
	var procs []*process
	stopAll := func(ps []*process, grace time.Duration) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range ps {
			if p == nil {
				continue
			}
			procs = append(procs, p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.stop(grace); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	var first []*process
	for _, c := range f.Managed {
		first = append(first, c.kyverno...)
		first = append(first, c.gatekeeper)
	}
	for _, c := range f.all() {
		first = append(first, c.controllerManager)
	}
	// Programs started with Run (policyhub's own) go first: they talk to everything else.
	f.extraMu.Lock()
	extra := f.extra
	f.extraMu.Unlock()
	stopAll(extra, 10*time.Second)
	stopAll(append(first, f.gateway, f.vela, f.flux), 5*time.Second)
	var apiservers []*process
	for _, c := range f.all() {
		apiservers = append(apiservers, c.apiserver)
	}
	stopAll(apiservers, 10*time.Second)
	stopAll([]*process{f.etcd}, 10*time.Second)
	f.launch.close()

	for _, p := range procs {
		if pid := p.pid(); pid != 0 {
			// Signal 0 to the process group: ESRCH means no member is left.
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("%s (pid %d) is still running after Stop", p.name, pid))
			}
		}
	}
	// etcd's data is not needed to read what went wrong, and it lives on tmpfs: never kept.
	if f.etcdDir != "" {
		errs = append(errs, os.RemoveAll(f.etcdDir))
	}
	if !f.keep {
		errs = append(errs, os.RemoveAll(f.Dir))
	}
	return errors.Join(errs...)
}
