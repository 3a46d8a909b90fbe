// Command policyhub-hub is the hub controller: it syncs FleetPolicies into the managed clusters
// their placement selects, through cluster-gateway, and reports per-cluster status, Events and
// metrics.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/hub/work"
	"github.com/policyhub/policyhub/internal/buildinfo"
	"github.com/policyhub/policyhub/internal/metricsauth"
)

type options struct {
	hubID                   string
	identity                string
	gatewayURL              string
	gatewayCAFile           string
	secretNamespace         string
	resyncInterval          time.Duration
	maxConcurrentPasses     int
	probeTimeout            time.Duration
	maxOwnedObjects         int
	tenantBudget            int
	maxConcurrentReconciles int
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	uiAddr, uiCertDir       string
	enableHTTP2             bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	shareFleet              bool
	replicaName             string
	leaderElectionNamespace string
	retryMaxDelay           time.Duration
	qps                     float64
	burst                   int
	maxExceptionLifetime    time.Duration
	// summaryBudget and heartbeatBudget are the fleet's summary writes and Lease renewals a
	// second (--summary-budget, --heartbeat-budget).
	summaryBudget, heartbeatBudget float64
	// approvableServiceAccounts is NAMESPACE/NAME,… (--approvable-service-accounts).
	approvableServiceAccounts string

	// metricsAudiences and uiAudiences are the audiences /metrics' and the web view's clients'
	// tokens must be issued for (--metrics-auth-audiences, --ui-auth-audiences).
	metricsAudiences, uiAudiences string
	fluxSourceNamespaces          string
	fluxArtifactHost              string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "policyhub-hub: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.hubID, "hub-id", policyhubv1.DefaultHubID, "This hub's id: the value of the policyhub.io/managed-by label on every object it writes in a managed cluster. Objects with another id are never touched.")
	fs.StringVar(&o.identity, "identity", "", "This process's identity in the clusters' sync Leases (default: <hub-id>/<hostname>-<random>).")
	fs.StringVar(&o.gatewayURL, "gateway-url", "", "Reach cluster-gateway directly at this URL (with this process's hub credentials) instead of through the hub's aggregation layer.")
	fs.StringVar(&o.gatewayCAFile, "gateway-ca-file", "", "CA bundle that verifies --gateway-url (default: the hub's CA).")
	fs.StringVar(&o.secretNamespace, "gateway-secret-namespace", gateway.DefaultSecretNamespace, "Namespace of cluster-gateway's cluster credential Secrets (their labels are the clusters' labels).")
	fs.DurationVar(&o.resyncInterval, "resync-interval", 10*time.Minute, "How often each cluster's worker syncs every declaration again: a backstop, since drift the watch sees is corrected at once.")
	fs.IntVar(&o.maxConcurrentPasses, "max-concurrent-passes", 32, "Cluster passes planning and writing at once, over all clusters. A cluster that does not answer its probe takes no slot.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 8, "Declarations of each kind reconciled at once. A reconcile never waits for a cluster: it hands the clusters' workers what it wants and writes the status from their results.")
	fs.DurationVar(&o.retryMaxDelay, "retry-max-delay", time.Minute, "Longest wait between retries of a cluster that is unreachable or failing (the wait starts at 1s and doubles): a cluster that comes back is synced within this long.")
	fs.IntVar(&o.maxOwnedObjects, "max-owned-objects-per-cluster", work.DefaultMaxOwnedObjects, "Most objects labelled as this hub's that the hub caches of one cluster: past it the cluster is not cached but read directly, declaration by declaration (still synced and pruned; drift there corrected every minute rather than at once, which the declarations' messages say), since the label is public and anyone labelling objects there could otherwise grow the hub's memory without bound.")
	fs.IntVar(&o.tenantBudget, work.TenantBudgetFlag, work.DefaultTenantBudget, "Most objects one tenant's declarations (the ApplicationPolicies, KubeVela Applications and FleetPolicyExceptions of one hub namespace other than the hub's own) may hold in one cluster, counted before anything is written: past it the tenant's newest declarations are refused there (Stalled, saying so) and what they held there is removed; everyone else's are synced as ever. Removals never wait on it.")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", 5*time.Second, "How long a cluster has to answer its probe before it is shown unreachable (Failed) and retried with backoff.")
	fs.Float64Var(&o.qps, "kube-api-qps", 100, "Client-side rate limit of requests to the hub, and to each managed cluster.")
	fs.IntVar(&o.burst, "kube-api-burst", 300, "Client-side burst of requests to the hub, and to each managed cluster.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS, to clients the hub's apiserver authenticates (TokenReview) and authorizes for GET on the non-resource URL /metrics (SubjectAccessReview; e.g. the policyhub-metrics-reader ClusterRole). --metrics-secure=false serves plain HTTP to anyone who can connect.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with the metrics server's tls.crt and tls.key (reloaded when they change), e.g. a cert-manager Secret's mount. Empty: a self-signed certificate generated at start.")
	fs.StringVar(&o.metricsAudiences, "metrics-auth-audiences", metricsauth.DefaultAudience, "Comma-separated audiences a /metrics client's token must be issued for (the TokenReview's audiences), e.g. a projected ServiceAccount token with audience policyhub: the token the client hands the hub is then refused by the apiserver itself, so the hub cannot act as the client. Empty: the apiserver's own audience, i.e. any token valid against the API (for scrapers that cannot present another).")
	fs.StringVar(&o.uiAudiences, "ui-auth-audiences", metricsauth.DefaultAudience, "Comma-separated audiences a web view client's token must be issued for, as --metrics-auth-audiences. Empty: any token valid against the API (e.g. OIDC tokens passed on by an authenticating proxy).")
	fs.StringVar(&o.uiAddr, "ui-bind-address", "0", "Address of the web view (HTTPS; each request's bearer token authenticated and authorized by the hub's apiserver for GET on the page's path, e.g. the policyhub-ui-viewer ClusterRole; it shows the whole fleet as the hub reads it); 0 disables it. kubectl policyhub ui serves it locally with the user's own rights instead.")
	fs.StringVar(&o.uiCertDir, "ui-cert-dir", "", "Directory with the web view's tls.crt and tls.key (reloaded when they change). Empty: a self-signed certificate generated at start.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics server. Off by default: HTTP/2's stream resets and rapid-reset attacks (CVE-2023-44487, CVE-2023-39325) are avoided by serving HTTP/1.1 only.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints (heap, CPU and goroutine profiles); empty or 0 disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader among hub replicas on the hub (a Lease), so one replica reconciles at a time.")
	fs.BoolVar(&o.shareFleet, "share-fleet", false, "Run active-active with the hub's other replicas: each holds a Lease of its own in the hub's namespace, and the clusters are shared between the live replicas (consistent hashing with bounded loads), each worked by exactly one; a replica that stops or dies hands its clusters over within seconds. Needs --leader-elect=false.")
	fs.StringVar(&o.replicaName, "replica-name", "", "This replica's name among the hub's replicas, which a cluster's policyhub.io/hub-replica label pins it to (default: the hostname, a pod's name).")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", policyhubv1.DefaultHubNamespace, "The hub's namespace: its leader election Lease, the ConfigMap that publishes its id, and the FleetPolicies' ClusterStatusSlices are there.")
	fs.DurationVar(&o.maxExceptionLifetime, "max-exception-lifetime", policyhubv1.DefaultMaxExceptionLifetime, "Longest a FleetPolicyException may last from its creation to its spec.expiresAt; one that asks for longer is Invalid and in no cluster. Keep it equal to the chart's exceptions.maxLifetime (admission refuses longer ones there).")
	fs.StringVar(&o.approvableServiceAccounts, "approvable-service-accounts", "", "ServiceAccounts, as NAMESPACE/NAME separated by commas, whose FleetPolicyException requests (and spec changes) may be approved, e.g. a GitOps controller's: its approvers must then know who wrote what it applies. Any other ServiceAccount's request is never approved, as whoever may take its token could approve their own request.")
	fs.StringVar(&o.fluxSourceNamespaces, "flux-source-namespaces", source.DefaultFluxNamespace, "Comma-separated namespaces whose Flux sources (GitRepository, OCIRepository, Bucket) a PolicySet's spec.source.fluxSource may name; the hub's own namespace (--leader-election-namespace) always may. Whoever may edit a source there decides what the sets reading it ship. A set naming another namespace is refused (SourceReady False) and nothing is read.")
	fs.StringVar(&o.fluxArtifactHost, "flux-artifact-host", source.DefaultFluxStorage, "The one server Flux artifacts are downloaded from, source-controller's storage as it advertises it (its --storage-adv-addr): host, host:port or http[s]://host[:port] (http, port 80 when not said). An artifact URL to any other scheme, host or port is refused before a connection is made; redirects are not followed and no proxy from the environment is used.")
	fs.Float64Var(&o.summaryBudget, "summary-budget", policyhubv1.DefaultSummaryBudget, "PolicyReportSummary writes a second the hub's API server is given for the whole fleet: each cluster's agent is told its share (status.pacing.pushInterval of its summary: the fleet's size over this, rounded up to 10s doubled, at most 1h) and holds changes of pass, warn and skip counts that long. About 25 a second saturate a 2-core hub (docs/benchmarks.md).")
	fs.Float64Var(&o.heartbeatBudget, "heartbeat-budget", policyhubv1.DefaultRenewalBudget, "Agent Lease renewals a second the hub's API server is given for the whole fleet: each agent is told its share (status.pacing.heartbeatInterval: the fleet's size over this, rounded up to 1m doubled, at most 1h), renews its Lease that often, and is judged silent after three.")
	version := fs.Bool("version", false, "Print the version, commit, build date and Go version, and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: policyhub-hub [flags]\n\nSyncs FleetPolicies into managed clusters through cluster-gateway.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	flag.Parse()
	if *version {
		fmt.Println("policyhub-hub", buildinfo.Get())
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	build := buildinfo.Get()
	ctrl.Log.Info("policyhub-hub starting", "version", build.Version, "commit", build.Commit, "buildDate", build.Date, "goVersion", build.GoVersion)

	if errs := validation.IsValidLabelValue(o.hubID); o.hubID == "" || len(errs) > 0 {
		return fmt.Errorf("--hub-id %q must be a valid label value: %s", o.hubID, strings.Join(errs, "; "))
	}
	if o.resyncInterval <= 0 || o.maxConcurrentPasses <= 0 || o.maxConcurrentReconciles <= 0 || o.probeTimeout <= 0 || o.maxOwnedObjects <= 0 || o.tenantBudget <= 0 || o.maxExceptionLifetime <= 0 {
		return errors.New("--resync-interval, --max-concurrent-passes, --max-concurrent-reconciles, --probe-timeout, --max-owned-objects-per-cluster, --" + work.TenantBudgetFlag + " and --max-exception-lifetime must be positive")
	}
	if err := checkBudgets(o); err != nil {
		return err
	}
	var approvable []string
	if o.approvableServiceAccounts != "" {
		users, err := declare.ServiceAccountUsers(strings.Split(o.approvableServiceAccounts, ","))
		if err != nil {
			return fmt.Errorf("--approvable-service-accounts: %w", err)
		}
		approvable = users
	}
	if err := checkMetricsCertDir(o); err != nil {
		return err
	}
	fluxFence, err := source.NewFluxFence(append([]string{o.leaderElectionNamespace}, splitList(o.fluxSourceNamespaces)...), o.fluxArtifactHost)
	if err != nil {
		return fmt.Errorf("--flux-source-namespaces, --flux-artifact-host: %w", err)
	}
	if o.shareFleet && o.leaderElect {
		return errors.New("--share-fleet runs the replicas active-active: it needs --leader-elect=false")
	}
	if o.replicaName == "" {
		o.replicaName, _ = os.Hostname()
	}
	if o.identity == "" {
		host, _ := os.Hostname()
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		o.identity = o.hubID + "/" + host + "-" + hex.EncodeToString(suffix)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("hub kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	gatewayCfg, err := gatewayConfig(cfg, o)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		return err
	}
	// The OCM kinds the inventory reads typed.
	if err := placement.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "policyhub-hub." + o.hubID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		Cache:                   controllers.CacheOptions(o.secretNamespace, o.leaderElectionNamespace, sharedAs(o)),
		Client:                  controllers.ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := metrics.RegisterBuildInfo(ctrlmetrics.Registry, build); err != nil {
		return fmt.Errorf("build info metric: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	workers, err := controllers.SetupHub(ctx, mgr, controllers.HubOptions{
		Gateway: gatewayCfg, SecretNamespace: o.secretNamespace, HubID: o.hubID, Lock: work.LockOptions{Identity: o.identity},
		Registry: ctrlmetrics.Registry, Resync: o.resyncInterval, RetryMaxDelay: o.retryMaxDelay,
		ProbeTimeout: o.probeTimeout, MaxOwnedObjects: o.maxOwnedObjects, TenantBudget: o.tenantBudget, MaxConcurrentPasses: o.maxConcurrentPasses,
		MaxExceptionLifetime:      o.maxExceptionLifetime,
		ApprovableServiceAccounts: approvable,
		MaxConcurrentReconciles:   o.maxConcurrentReconciles,
		// The hub's namespace: where its leader election Lease is.
		Namespace: o.leaderElectionNamespace,
		Replica:   replica(o),
		Flux:      &fluxFence,
		Pacing:    &controllers.PacingOptions{SummaryBudget: o.summaryBudget, RenewalBudget: o.heartbeatBudget},
	})
	if err != nil {
		return err
	}
	// On shutdown, the sync Leases still held are given up, so other writers need not wait for them to expire.
	defer workers.Close()
	if err := addUI(mgr, cfg, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting policyhub-hub", "hubID", o.hubID, "identity", o.identity, "gateway", gatewayCfg.Host, "secretNamespace", o.secretNamespace)
	return mgr.Start(ctx)
}

// metricsOptions serve /metrics as kubebuilder's scaffold does: HTTPS, each request's bearer
// token authenticated and authorized by the hub's apiserver (TokenReview, SubjectAccessReview),
// unless --metrics-secure=false. The filter is metricsauth's, controller-runtime's without its
// k8s.io/apiserver dependency (see the package).
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.enableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if o.metricsSecure {
		opts.FilterProvider = metricsauth.FilterProvider(metricsauth.Options{Audiences: audiences(o.metricsAudiences)})
		// Empty: controller-runtime generates a self-signed certificate in memory (the
		// container's root filesystem is read-only).
		opts.CertDir = o.metricsCertDir
	}
	return opts
}

// audiences are the comma-separated audiences of a flag (none when it is empty).
func audiences(flag string) []string {
	var out []string
	for _, a := range strings.Split(flag, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// checkBudgets refuses a budget that is not a positive, finite rate: the pacing is the fleet's
// size over it.
func checkBudgets(o options) error {
	for _, b := range []struct {
		flag  string
		value float64
	}{{"--summary-budget", o.summaryBudget}, {"--heartbeat-budget", o.heartbeatBudget}} {
		if !(b.value > 0) || math.IsInf(b.value, 0) {
			return fmt.Errorf("%s %v must be a positive, finite number of writes a second", b.flag, b.value)
		}
	}
	return nil
}

// checkMetricsCertDir refuses a --metrics-cert-dir without its certificate and key: controller-runtime
// would fall back to a self-signed certificate, which scrapers verifying the CA then refuse.
func checkMetricsCertDir(o options) error {
	if o.metricsCertDir == "" {
		return nil
	}
	if !o.metricsSecure {
		return errors.New("--metrics-cert-dir needs --metrics-secure")
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(o.metricsCertDir, f)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}

// gatewayConfig is the config that reaches cluster-gateway: the hub's own (the gateway is an
// aggregated API of the hub) or, with --gateway-url, the gateway's URL with the hub credentials.
func gatewayConfig(hub *rest.Config, o options) (*rest.Config, error) {
	if o.gatewayURL == "" {
		return hub, nil
	}
	cfg := rest.CopyConfig(hub)
	cfg.Host = o.gatewayURL
	if o.gatewayCAFile != "" {
		ca, err := os.ReadFile(o.gatewayCAFile)
		if err != nil {
			return nil, fmt.Errorf("--gateway-ca-file: %w", err)
		}
		cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = ca, ""
	}
	return cfg, nil
}

// replica is this process's place among the hub's replicas with --share-fleet (nil without).
func replica(o options) *shard.Replica {
	if !o.shareFleet {
		return nil
	}
	return &shard.Replica{HubID: o.hubID, Namespace: o.leaderElectionNamespace, Name: o.replicaName, Identity: o.identity}
}

// sharedAs is the name this replica shares the fleet as ("" without --share-fleet): its cache
// holds only the summaries of the clusters it works.
func sharedAs(o options) string {
	if r := replica(o); r != nil {
		return r.Name
	}
	return ""
}

// splitList is a comma-separated flag's items, blanks left out.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
