// Command demo runs policyhub on a local fleet, for a newcomer (`make demo`): a hub and two
// managed clusters (env=staging, env=prod) with real cluster-gateway and Kyverno, the hub and an
// agent per cluster as local processes, the samples of config/samples applied; it waits for
// them to converge, prints what `kubectl policyhub` shows, shows Kyverno refusing a Deployment,
// and keeps running until Ctrl-C. DEMO_ONESHOT=1 exits after printing.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/metricsauth"
)

const hubID = "demo"

func main() {
	// Processes started from this thread get its death signal: they end with the demo, however it ends.
	runtime.LockOSThread()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, os.Getenv("DEMO_ONESHOT") == "1")
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

type demo struct {
	out   io.Writer
	f     *fleet.Fleet
	bin   string
	start time.Time
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, out io.Writer, oneShot bool) (err error) {
	d := &demo{out: out, start: time.Now()}
	bin, err := os.MkdirTemp("", "policyhub-demo-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	d.bin = bin
	d.say("building policyhub-hub, policyhub-agent and kubectl-policyhub...")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/policyhub-hub", "./cmd/policyhub-agent", "./cmd/kubectl-policyhub")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build (run the demo from the repository's root): %w", err)
	}

	d.say("starting a local fleet: a hub, cluster-1 (env=staging) and cluster-2 (env=prod), cluster-gateway, Kyverno in each cluster...")
	d.f, err = fleet.Start(ctx, fleet.Options{Managed: []fleet.ManagedCluster{
		{Name: "cluster-1", Labels: map[string]string{"env": "staging"}, Kyverno: true},
		{Name: "cluster-2", Labels: map[string]string{"env": "prod"}, Kyverno: true},
	}, ControllerManager: true})
	if err != nil {
		return err
	}
	defer func() {
		d.say("stopping the fleet...")
		if stopErr := d.f.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	d.say("fleet ready; every process logs to %s", d.f.LogDir)

	metricsAddr, err := d.startHub(ctx)
	if err != nil {
		return err
	}
	for _, c := range d.f.Managed {
		if err := d.startAgent(ctx, c); err != nil {
			return err
		}
	}
	if err := d.applySamples(ctx); err != nil {
		return err
	}
	if err := d.waitConverged(ctx); err != nil {
		return err
	}
	for _, args := range [][]string{{"clusters"}, {"status"}, {"rollout", "status"}, {"info", "shop", "-n", "shop"}} {
		d.kubectlPolicyhub(ctx, args...)
	}
	d.showDenial(ctx)
	tokenFile, err := d.showMetrics(ctx, metricsAddr)
	if err != nil {
		return err
	}
	uiURL, err := d.serveUI(ctx, oneShot)
	if err != nil {
		return err
	}

	fmt.Fprintf(d.out, "\nThe fleet is yours to explore:\n")
	fmt.Fprintf(d.out, "  the web view: %s\n", uiURL)
	fmt.Fprintf(d.out, "  hub:       KUBECONFIG=%s\n", d.f.Hub.Kubeconfig)
	for _, c := range d.f.Managed {
		fmt.Fprintf(d.out, "  %s: KUBECONFIG=%s\n", c.Name, c.Kubeconfig)
	}
	fmt.Fprintf(d.out, "  the hub's metrics (HTTPS with a self-signed certificate; a token allowed to get /metrics):\n")
	fmt.Fprintf(d.out, "    curl -k -H \"Authorization: Bearer $(cat %s)\" https://%s/metrics\n", tokenFile, metricsAddr)
	fmt.Fprintf(d.out, "    (another token: kubectl --kubeconfig %s -n %s create token %s --audience %s)\n", d.f.Hub.Kubeconfig, metricsReaderNamespace, metricsReader, metricsauth.DefaultAudience)
	fmt.Fprintf(d.out, "  kubectl policyhub: %s --kubeconfig %s status\n", filepath.Join(d.bin, "kubectl-policyhub"), d.f.Hub.Kubeconfig)
	if oneShot {
		return nil
	}
	fmt.Fprintf(d.out, "\nPress Ctrl-C to stop everything.\n")
	<-ctx.Done()
	return nil
}

// startHub runs policyhub-hub against the hub and returns its metrics address.
func (d *demo) startHub(ctx context.Context) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(ports[0])
	d.say("starting policyhub-hub (metrics on %s)...", metrics)
	// The hub's namespace: it publishes its id there, so kubectl policyhub needs no --hub-id.
	hub, err := client.New(d.f.Hub.Config, client.Options{})
	if err != nil {
		return "", err
	}
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policyhub-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	err = d.f.Run("policyhub-hub", filepath.Join(d.bin, "policyhub-hub"),
		"--kubeconfig", d.f.Hub.Kubeconfig, "--hub-id", hubID, "--gateway-secret-namespace", d.f.SecretNamespace,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--leader-elect=false", "--resync-interval", "1m")
	return metrics, err
}

// The demo's metrics reader: a ServiceAccount on the hub bound to config/rbac/hub's
// policyhub-metrics-reader, as Prometheus's would be.
const (
	metricsReader          = "policyhub-metrics-reader"
	metricsReaderNamespace = "policyhub-system"
)

// showMetrics scrapes the hub's /metrics as Prometheus does, over HTTPS with a bearer token of
// the metrics reader (the hub asks its apiserver who the token is and whether it may get
// /metrics), and without a token; it prints both answers and returns the token's file.
func (d *demo) showMetrics(ctx context.Context, metricsAddr string) (string, error) {
	hub, err := d.client(d.f.Hub.Config)
	if err != nil {
		return "", err
	}
	role, err := os.ReadFile("config/rbac/hub/metrics_reader_role.yaml")
	if err != nil {
		return "", err
	}
	if err := applyManifests(ctx, hub, string(role)); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metricsReaderNamespace, Name: metricsReader}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metricsReaderNamespace, Name: metricsReader}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := hub.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("metrics reader: %w", err)
		}
	}
	cs, err := kubernetes.NewForConfig(d.f.Hub.Config)
	if err != nil {
		return "", err
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(metricsReaderNamespace).CreateToken(ctx, metricsReader,
		// For the hub's audience, as Prometheus's projected token is: the hub refuses full API tokens.
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry, Audiences: []string{metricsauth.DefaultAudience}}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for the metrics reader: %w", err)
	}
	tokenFile := filepath.Join(d.f.Dir, "metrics-reader.token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	// The hub's certificate is self-signed (no --metrics-cert-dir): not verified, as curl -k.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + metricsAddr + "/metrics"
	fmt.Fprintf(d.out, "\n$ curl -k https://%s/metrics   # the hub's metrics, as Prometheus scrapes them\n", metricsAddr)
	for _, c := range []struct{ what, token string }{{"without a token", ""}, {"with the metrics reader's token", tr.Status.Token}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Fprintf(d.out, "%s: %v\n", c.what, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		series := 0
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "policyhub_") {
				series++
			}
		}
		fmt.Fprintf(d.out, "%s: %s", c.what, resp.Status)
		if resp.StatusCode == http.StatusOK {
			fmt.Fprintf(d.out, ", %d policyhub series", series)
		}
		fmt.Fprintln(d.out)
	}
	return tokenFile, nil
}

// startAgent gives the cluster's agent its identity on the hub (config/rbac/agent-hub-access:
// it may write only its cluster's summary) and runs it.
func (d *demo) startAgent(ctx context.Context, c *fleet.Cluster) error {
	hub, err := d.client(d.f.Hub.Config)
	if err != nil {
		return err
	}
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	manifest, err := os.ReadFile("config/rbac/agent-hub-access/agent_access.yaml")
	if err != nil {
		return err
	}
	if err := applyManifests(ctx, hub, strings.ReplaceAll(string(manifest), "namespace: CLUSTER", "namespace: "+c.Name)); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(d.f.Hub.Config)
	if err != nil {
		return err
	}
	expiry := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(c.Name).CreateToken(ctx, "policyhub-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s's agent: %w", c.Name, err)
	}
	cfg := rest.AnonymousClientConfig(d.f.Hub.Config)
	cfg.BearerToken = tr.Status.Token
	hubKubeconfig := filepath.Join(d.f.Dir, c.Name+"-agent-hub.kubeconfig")
	if err := fleet.WriteKubeconfig(hubKubeconfig, "hub", cfg); err != nil {
		return err
	}
	d.say("starting policyhub-agent for %s (its hub identity may write only %s/summary)...", c.Name, c.Name)
	return d.f.Run("policyhub-agent-"+c.Name, filepath.Join(d.bin, "policyhub-agent"),
		"--kubeconfig", c.Kubeconfig, "--cluster-name", c.Name, "--hub-kubeconfig", hubKubeconfig,
		"--push-interval", "2s", "--heartbeat-interval", "30s", "--discovery-interval", "10s", "--health-probe-bind-address", "0")
}

// applySamples applies config/samples to the hub and the sample application to staging.
func (d *demo) applySamples(ctx context.Context) error {
	hub, err := d.client(d.f.Hub.Config)
	if err != nil {
		return err
	}
	for _, c := range append([]*fleet.Cluster{d.f.Hub}, d.f.Managed...) {
		cl, err := d.client(c.Config)
		if err != nil {
			return err
		}
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	files, err := filepath.Glob("config/samples/*.yaml")
	if err != nil {
		return err
	}
	for _, file := range files {
		if strings.HasPrefix(filepath.Base(file), "policyset-") {
			// Their sources are a registry and a Git repository of your own (and Flux): shown, not applied.
			d.say("skipping %s: its source is your registry or Git repository (docs/policy-sets.md)", file)
			continue
		}
		if strings.HasPrefix(filepath.Base(file), "fleetpolicyexception-") {
			// An exception is requested and approved by people, with an end date of its own.
			d.say("skipping %s: request it with kubectl policyhub exception request (docs/exceptions.md)", file)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		d.say("applying %s to the hub", file)
		if err := applyManifests(ctx, hub, string(data)); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	// The application's Deployments go to staging once the policies are there: Kyverno then
	// judges them at admission.
	if err := d.waitFor(ctx, "the declarations to be synced", func() (string, bool, error) {
		return d.declarationsReady(ctx, hub)
	}); err != nil {
		return err
	}
	staging, err := d.client(d.f.Cluster("cluster-1").Config)
	if err != nil {
		return err
	}
	data, err := os.ReadFile("config/samples/workloads/shop.yaml")
	if err != nil {
		return err
	}
	d.say("deploying the sample application shop to cluster-1 (staging): checkout complies, web has no memory limit")
	return applyManifests(ctx, staging, string(data))
}

// declarationsReady says how many FleetPolicies and ApplicationPolicies are Ready; a FleetPolicy
// rolled out in waves counts once its rollout is under way (its later waves wait for a soak or
// a person's approval, which the demo does not give).
func (d *demo) declarationsReady(ctx context.Context, hub client.Client) (string, bool, error) {
	fps := &policyhubv1.FleetPolicyList{}
	aps := &policyhubv1.ApplicationPolicyList{}
	if err := hub.List(ctx, fps); err != nil {
		return "", false, err
	}
	if err := hub.List(ctx, aps); err != nil {
		return "", false, err
	}
	ready := func(conds []metav1.Condition) bool {
		c := meta.FindStatusCondition(conds, policyhubv1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	}
	rollingOut := func(fp *policyhubv1.FleetPolicy) bool {
		c := meta.FindStatusCondition(fp.Status.Conditions, policyhubv1.ConditionReady)
		return fp.Spec.Rollout != nil && c != nil && (c.Reason == "RolloutProgressing" || c.Reason == "RolloutPaused")
	}
	fpReady, apReady := 0, 0
	for i := range fps.Items {
		if ready(fps.Items[i].Status.Conditions) || rollingOut(&fps.Items[i]) {
			fpReady++
		}
	}
	for _, ap := range aps.Items {
		if ready(ap.Status.Conditions) {
			apReady++
		}
	}
	progress := fmt.Sprintf("FleetPolicies ready or rolling out %d/%d, ApplicationPolicies ready %d/%d", fpReady, len(fps.Items), apReady, len(aps.Items))
	return progress, fpReady == len(fps.Items) && apReady == len(aps.Items) && len(fps.Items)+len(aps.Items) > 0, nil
}

// waitConverged waits until both agents reported and shop's violation in staging is seen.
func (d *demo) waitConverged(ctx context.Context) error {
	hub, err := d.client(d.f.Hub.Config)
	if err != nil {
		return err
	}
	return d.waitFor(ctx, "the agents' reports (Kyverno scans new resources within about a minute)", func() (string, bool, error) {
		summaries := &policyhubv1.PolicyReportSummaryList{}
		if err := hub.List(ctx, summaries); err != nil {
			return "", false, err
		}
		ap := &policyhubv1.ApplicationPolicy{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "shop-require-limits"}, ap); err != nil {
			return "", false, err
		}
		violations := ap.Status.Summary.Violations
		return fmt.Sprintf("summaries from %d/2 clusters, shop's violations seen: %d", len(summaries.Items), violations),
			len(summaries.Items) == 2 && violations > 0, nil
	})
}

// waitFor polls check every second, printing its progress when it changes, for at most 5 minutes.
func (d *demo) waitFor(ctx context.Context, what string, check func() (string, bool, error)) error {
	d.say("waiting for %s...", what)
	deadline := time.Now().Add(5 * time.Minute)
	last := ""
	for {
		progress, done, err := check()
		if err != nil {
			progress = "not yet: " + err.Error()
		}
		if progress != last {
			d.say("  %s", progress)
			last = progress
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within 5 minutes (last: %s); logs in %s", what, progress, d.f.LogDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// kubectlPolicyhub runs the CLI against the hub and prints what it shows.
func (d *demo) kubectlPolicyhub(ctx context.Context, args ...string) {
	fmt.Fprintf(d.out, "\n$ kubectl policyhub %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "kubectl-policyhub"), append([]string{"--kubeconfig", d.f.Hub.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = d.out, d.out
	// Exit code 1 means "violations found": what the demo is about, not a failure.
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		fmt.Fprintf(d.out, "(kubectl policyhub: %v)\n", err)
	}
}

// showDenial deploys an image tagged latest to prod, where disallow-latest-tag is enforced.
func (d *demo) showDenial(ctx context.Context) {
	prod, err := d.client(d.f.Cluster("cluster-2").Config)
	if err != nil {
		fmt.Fprintf(d.out, "(%v)\n", err)
		return
	}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-latest", Labels: map[string]string{"app.oam.dev/name": "shop", "team": "storefront"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-latest"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web-latest"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:latest"}}},
			},
		},
	}
	fmt.Fprintf(d.out, "\n$ kubectl --context cluster-2 -n shop create deployment web-latest --image nginx:latest\n")
	if err := prod.Create(ctx, deploy); err != nil {
		fmt.Fprintf(d.out, "Kyverno refused it: %s\n", err)
		return
	}
	fmt.Fprintf(d.out, "(admitted: the policy did not refuse it)\n")
}

func (d *demo) client(cfg *rest.Config) (client.Client, error) {
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	return client.New(cfg, client.Options{Scheme: scheme})
}

// applyManifests server-side applies every document of a multi-document YAML.
func applyManifests(ctx context.Context, c client.Client, manifests string) error {
	decoder := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("policyhub-demo"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
