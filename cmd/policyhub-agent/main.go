// Command policyhub-agent runs in a managed cluster: it reads Kyverno's policy reports and
// blocked-admission Events and pushes a bounded summary of them into the cluster's namespace on
// the hub, where policyhub-hub folds it into FleetPolicy status and metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/policyhub/policyhub/agent"
	"github.com/policyhub/policyhub/agent/hubconfig"
	"github.com/policyhub/policyhub/internal/buildinfo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "policyhub-agent: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o             agent.Options
		hubKubeconfig string
		probeAddr     string
		pprofAddr     string
	)
	fs := flag.CommandLine
	fs.StringVar(&o.Cluster, "cluster-name", "", "This managed cluster's name, as the hub knows it (its cluster-gateway name); the summary goes to the hub namespace of that name. Required.")
	fs.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "Kubeconfig of the agent's identity on the hub, allowed to write only its cluster's PolicyReportSummary and its Lease policyhub-agent. Required. Its token (token: or tokenFile:) is read again every minute and after the hub refuses it, so a short-lived token can be rotated by rewriting the file (e.g. its Secret) without a restart.")
	fs.DurationVar(&o.PushInterval, "push-interval", 10*time.Second, "Least time between two summary pushes to the hub; changes in between are pushed together. An unchanged summary is not pushed again. A floor: the hub's published share (the summary's status.pacing) is kept when longer, urgent changes (fail, error, blocked counts, policies listed) going ahead at this interval from a reserve.")
	fs.DurationVar(&o.Heartbeat, "heartbeat-interval", time.Minute, "How often the agent renews its Lease on the hub so the hub can tell it is alive; the hub marks results stale after three missed renewals. A floor: the heartbeat the hub publishes is kept when longer.")
	fs.StringVar(&o.ApplicationLabel, "application-label", "app.oam.dev/name", "Label whose value names a resource's application (KubeVela's by default; e.g. app.kubernetes.io/instance).")
	fs.StringVar(&o.KyvernoNamespace, "kyverno-namespace", "kyverno", "Namespace of Kyverno's admission and reports controllers' Deployments (its Helm chart's), read for Kyverno's version (the admission controller's image tag) and the settings the hub relies on (--enablePolicyException, --exceptionNamespace, --allowedResults).")
	fs.Func("kyverno-metrics-url", "Kyverno's admission controller metrics endpoint (e.g. http://10.0.0.5:8000/metrics), one per replica; repeat the flag or give a comma-separated list. The agent reads its kyverno_policy_results_total, when it builds a summary, to count server-side dry-runs (kubectl apply --dry-run=server) apart from refused admissions (ClusterPolicy and Policy only). Default: the admission controller's Pods in --kyverno-namespace, at podIP:8000 (or their metrics-port); set it where the agent cannot reach Pod IPs.", func(v string) error {
		urls, err := parseMetricsURLs(v)
		o.KyvernoMetricsURLs = append(o.KyvernoMetricsURLs, urls...)
		return err
	})
	fs.IntVar(&o.MaxViolations, "max-violations", 50, "Violations (fail and error results, most severe and newest first) kept in the summary; at most 200.")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", 30*time.Second, "How often the agent looks for report APIs installed after it started (e.g. openreports.io).")
	fs.DurationVar(&o.AdmissionPolicyInterval, "admission-policy-interval", time.Minute, "How often the agent evaluates the cluster's existing resources again against its ValidatingAdmissionPolicies (with the API server's own admission code; a policy or binding change is evaluated at once).")
	fs.IntVar(&o.AdmissionPolicyMaxObjects, "admission-policy-max-objects", 50000, "Objects the ValidatingAdmissionPolicy evaluation reads in all (at most 20,000 of one resource type); the rest is left out and said so in the summary. Its results take some 2 KiB an object at 20 policies: size the agent's memory with it.")
	noVAP := fs.Bool("no-admission-policy-evaluation", false, "Do not evaluate existing resources against the cluster's ValidatingAdmissionPolicies (the summary then carries no results of engine Kubernetes).")
	fs.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints (heap, CPU and goroutine profiles); empty or 0 disables them.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	version := fs.Bool("version", false, "Print the version, commit, build date and Go version, and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: policyhub-agent --cluster-name NAME --hub-kubeconfig FILE [flags]\n\nPushes a summary of this cluster's Kyverno policy reports to the policyhub hub.\nThe managed cluster is reached in-cluster, or with --kubeconfig / $KUBECONFIG.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	flag.Parse()
	if *version {
		fmt.Println("policyhub-agent", buildinfo.Get())
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	build := buildinfo.Get()
	ctrl.Log.Info("policyhub-agent starting", "version", build.Version, "commit", build.Commit, "buildDate", build.Date, "goVersion", build.GoVersion)

	if o.Cluster == "" || hubKubeconfig == "" {
		fs.Usage()
		return errors.New("--cluster-name and --hub-kubeconfig are required")
	}
	if errs := validation.IsDNS1123Label(o.Cluster); len(errs) > 0 {
		return fmt.Errorf("--cluster-name %q must be a valid namespace name on the hub: %v", o.Cluster, errs)
	}
	if o.PushInterval <= 0 || o.Heartbeat <= 0 || o.DiscoveryInterval <= 0 || o.AdmissionPolicyInterval <= 0 {
		return errors.New("--push-interval, --heartbeat-interval, --discovery-interval and --admission-policy-interval must be positive")
	}
	o.NoAdmissionPolicies = *noVAP
	if o.AdmissionPolicyMaxObjects <= 0 {
		return errors.New("--admission-policy-max-objects must be positive")
	}
	if len(o.KyvernoMetricsURLs) > maxMetricsURLs {
		return fmt.Errorf("--kyverno-metrics-url: %d URLs, at most %d", len(o.KyvernoMetricsURLs), maxMetricsURLs)
	}
	if o.MaxViolations < 0 || o.MaxViolations > 200 {
		return fmt.Errorf("--max-violations %d must be between 0 and 200", o.MaxViolations)
	}
	var err error
	if o.Managed, err = ctrl.GetConfig(); err != nil {
		return fmt.Errorf("managed cluster config: %w", err)
	}
	// Its token is read again as it is rotated (see agent/hubconfig): no restart needed.
	if o.Hub, err = hubconfig.Load(hubKubeconfig); err != nil {
		return fmt.Errorf("--hub-kubeconfig: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	ctx = log.IntoContext(ctx, ctrl.Log.WithName("agent"))
	if probeAddr != "0" {
		if err := serveProbes(ctx, probeAddr); err != nil {
			return err
		}
	}
	if pprofAddr != "" && pprofAddr != "0" {
		if err := servePprof(ctx, pprofAddr); err != nil {
			return err
		}
	}
	log.FromContext(ctx).Info("starting policyhub-agent", "hub", o.Hub.Host, "pushInterval", o.PushInterval, "heartbeat", o.Heartbeat)
	return agent.Run(ctx, o)
}

// maxMetricsURLs bounds --kyverno-metrics-url: one per admission controller replica.
const maxMetricsURLs = 16

// parseMetricsURLs reads a comma-separated list of http(s) URLs with a host.
func parseMetricsURLs(v string) ([]string, error) {
	var out []string
	for raw := range strings.SplitSeq(v, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("%q is not an http(s) URL with a host and no credentials", raw)
		}
		out = append(out, u.String())
	}
	if len(out) > maxMetricsURLs {
		return nil, fmt.Errorf("%d URLs, at most %d", len(out), maxMetricsURLs)
	}
	return out, nil
}

// servePprof serves Go's profiles, as the hub's --pprof-bind-address does (controller-runtime's).
func servePprof(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serve(ctx, addr, "--pprof-bind-address", mux)
}

// serveProbes answers /healthz and /readyz while the process runs: the agent survives a hub
// outage by retrying, so it is alive and ready whenever it runs.
func serveProbes(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	return serve(ctx, addr, "--health-probe-bind-address", mux)
}

// serve serves handler on addr until ctx ends; flag names the flag addr came from.
func serve(ctx context.Context, addr, flag string, handler http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}
