package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// KyvernoNamespace is where the fleet's Kyverno processes keep their leases, secrets and config.
const KyvernoNamespace = "kyverno"

// Kyverno's webhook configurations; the admission controller registers them by URL to itself.
const (
	kyvernoPolicyWebhook   = "kyverno-policy-validating-webhook-cfg"
	kyvernoResourceWebhook = "kyverno-resource-validating-webhook-cfg"
)

// startKyverno runs Kyverno's admission and reports controllers of version as local processes
// against the managed cluster, makes their Deployments (the signal a real cluster offers of which
// Kyverno it runs, see signal.go), and waits until the admission controller serves and has
// registered its webhooks. Kyverno 1.16 takes the same flags (cmd/internal/flag.go; it has no
// --allowedResults).
func (f *Fleet) startKyverno(ctx context.Context, b binaries, c *Cluster, version string, reportsArgs []string) error {
	ports, err := freePorts(3)
	if err != nil {
		return fmt.Errorf("kyverno %s: %w", c.Name, err)
	}
	webhookPort, admissionMetrics, reportsMetrics := ports[0], ports[1], ports[2]
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("kyverno %s: %w", c.Name, err)
	}
	if err := applyObjects(ctx, cl, []*unstructured.Unstructured{namespace(KyvernoNamespace)}); err != nil {
		return fmt.Errorf("kyverno %s: %w", c.Name, err)
	}
	env := func(component string) []string {
		return []string{
			"KYVERNO_NAMESPACE=" + KyvernoNamespace,
			"KYVERNO_SERVICEACCOUNT_NAME=kyverno-" + component,
			"KYVERNO_DEPLOYMENT=kyverno-" + component,
			"KYVERNO_POD_NAME=kyverno-" + component + "-local",
			"INIT_CONFIG=kyverno",
			"METRICS_CONFIG=kyverno-metrics",
		}
	}
	// Kyverno reads PolicyExceptions only when enabled, and only from the namespace named: the
	// one the hub writes them to (policyhub's FleetPolicyExceptions), as a Helm install with
	// features.policyExceptions {enabled: true, namespace: policyhub-system} would run it.
	exceptionArgs := []string{"--enablePolicyException=true", "--exceptionNamespace=" + policyhubv1.DefaultExceptionNamespace}
	admission := &process{
		name: "kyverno " + c.Name,
		path: b.kyverno[version].admission,
		env:  env("admission-controller"),
		args: append([]string{
			"--kubeconfig=" + c.Kubeconfig,
			"--serverIP=127.0.0.1:" + strconv.Itoa(webhookPort),
			"--webhookServerHost=127.0.0.1",
			"--webhookServerPort=" + strconv.Itoa(webhookPort),
			"--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
			"--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
			// The admission controller exports its metrics (Prometheus text on /metrics), as
			// Kyverno's chart runs it: the agent reads its kyverno_policy_results_total to count
			// server-side dry-runs apart (Cluster.KyvernoMetricsURL). Its own port, on loopback.
			"--controllerRuntimeMetricsAddress=0",
			"--metricsHost=127.0.0.1",
			"--metricsPort=" + strconv.Itoa(admissionMetrics),
			"--disableLogColor",
		}, exceptionArgs...),
		logPath: filepath.Join(f.LogDir, "kyverno-"+c.Name+".log"),
	}
	reports := &process{
		name: "kyverno-reports " + c.Name,
		path: b.kyverno[version].reports,
		env:  env("reports-controller"),
		args: append([]string{
			"--kubeconfig=" + c.Kubeconfig,
			"--disableMetrics=true",
			"--metricsHost=127.0.0.1",
			"--metricsPort=" + strconv.Itoa(reportsMetrics),
			"--backgroundScanInterval=30s",
			"--disableLogColor",
		}, append(exceptionArgs, reportsArgs...)...),
		logPath: filepath.Join(f.LogDir, "kyverno-reports-"+c.Name+".log"),
	}
	// Before the processes start, so that Kyverno reads its resource filter from the start.
	if err := applyObjects(ctx, cl, kyvernoSignal(version, admission.args, reports.args)); err != nil {
		return fmt.Errorf("kyverno %s: its Deployments: %w", c.Name, err)
	}
	c.KyvernoVersion = version
	c.KyvernoMetricsURL = "http://127.0.0.1:" + strconv.Itoa(admissionMetrics) + "/metrics"
	for _, p := range []*process{admission, reports} {
		if err := p.start(f.launch); err != nil {
			return err
		}
		c.kyverno = append(c.kyverno, p)
	}

	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The policy webhook validates policies sent to the cluster, so it must have its webhooks. The
	// resource webhook configuration is registered empty and gets webhooks once policies exist.
	for _, hook := range []struct {
		name         string
		needWebhooks bool
	}{{kyvernoPolicyWebhook, true}, {kyvernoResourceWebhook, false}} {
		err := poll(ctx, 250*time.Millisecond, "Kyverno webhook "+hook.name+" in "+c.Name, admission, func(ctx context.Context) (bool, error) {
			if err := reports.exitError(); err != nil {
				return false, err
			}
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := cl.Get(ctx, types.NamespacedName{Name: hook.name}, cfg); err != nil {
				return false, err
			}
			return !hook.needWebhooks || len(cfg.Webhooks) > 0, nil
		})
		if err != nil {
			return err
		}
	}
	// Kyverno's own serving certificate is self-signed and not in the fleet's CA; this probe only
	// asks whether the server is up, over loopback.
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	readiness := "https://127.0.0.1:" + strconv.Itoa(webhookPort) + "/health/readiness"
	return poll(ctx, 250*time.Millisecond, "Kyverno readiness in "+c.Name, admission, func(ctx context.Context) (bool, error) {
		return getOK(ctx, probe, readiness)
	})
}
