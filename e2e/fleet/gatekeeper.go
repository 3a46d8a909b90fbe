package fleet

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OPA Gatekeeper, a second policy engine a managed cluster can run (ManagedCluster.Gatekeeper).
// Its controller is one binary whose --operation flags choose what it does; the release runs two
// Deployments (webhook; audit, status and generate), the fleet one process with all four, against
// the cluster as Kyverno's processes are. What a Helm install makes in the cluster is taken from
// the release manifest in Gatekeeper's module (deploy/gatekeeper.yaml): its 17 CRDs, its namespace
// and service account, its two Deployments scaled to zero (the process runs instead: they say
// which Gatekeeper runs, as in a real cluster), and its ValidatingWebhookConfiguration, whose
// Service reference is rewritten to a URL on 127.0.0.1 (no Services route anywhere here).
//
// Gatekeeper normally rotates its own certificate and writes the CA into its webhook
// configuration; here --disable-cert-rotation turns that off, the fleet's CA issues the serving
// certificate into --cert-dir, and the fleet registers the webhook configuration with that CA.
// Gatekeeper reads its own Pod (POD_NAMESPACE, POD_NAME) and makes it the owner of its status
// objects: the fleet makes one that never runs. Upstream's --debug-use-fake-pod does without,
// but the owner its status objects then name (uid "abcd") does not exist, and a garbage
// collector (Options.ControllerManager) deletes objects whose owner is gone.

// GatekeeperVersion is the Gatekeeper the fleet runs; hack/testbin.sh builds the same one.
const GatekeeperVersion = "v3.23.1"

// GatekeeperNamespace is Gatekeeper's own namespace (POD_NAMESPACE): it keeps its per-pod status
// objects there, and its webhook leaves it alone.
const GatekeeperNamespace = "gatekeeper-system"

// GatekeeperWebhook is Gatekeeper's ValidatingWebhookConfiguration, as its release names it.
const GatekeeperWebhook = "gatekeeper-validating-webhook-configuration"

// GatekeeperPod is the Pod the fleet makes for its Gatekeeper process (POD_NAME): Gatekeeper reads
// its own Pod and makes it the owner of the status objects it writes. No kubelet runs: it never
// runs, but it exists, so a garbage collector (Options.ControllerManager) keeps those objects.
const GatekeeperPod = "gatekeeper-local"

// GatekeeperAuditInterval is the fleet's --audit-interval (Gatekeeper's default is 60 s): short,
// so that tests see audits. ManagedCluster.GatekeeperArgs can set another.
const GatekeeperAuditInterval = 10 * time.Second

const gatekeeperModule = "github.com/open-policy-agent/gatekeeper/v3@" + GatekeeperVersion

// gatekeeperManifest is Gatekeeper's release manifest inside its module.
const gatekeeperManifest = "deploy/gatekeeper.yaml"

// gatekeeperCRDs are every CRD of Gatekeeper's release (ConstraintTemplate, Config, the status,
// mutation, expansion, external data and sync kinds): its controllers look for all of them.
var gatekeeperCRDs = []crdSource{{module: gatekeeperModule, dir: "deploy", match: "gatekeeper.yaml"}}

// startGatekeeper runs Gatekeeper's webhook, audit, status and generate operations as one local
// process against the managed cluster and waits until it is ready: its /readyz answers
// (certificate served, existing templates and constraints ingested) and the apiserver reaches
// its webhook. Gatekeeper's CRDs must be Established.
func (f *Fleet) startGatekeeper(ctx context.Context, binary string, ca *certAuthority, c *Cluster, extraArgs []string) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	release, err := gatekeeperRelease(ctx)
	if err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	webhookPort, healthPort, prometheusPort := ports[0], ports[1], ports[2]

	// The serving certificate, in the layout controller-runtime's webhook server reads.
	certDir := filepath.Join(c.dir, "gatekeeper-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	serving, err := ca.serving("gatekeeper-webhook-service", "gatekeeper-webhook-service."+GatekeeperNamespace+".svc")
	if err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	for name, data := range map[string][]byte{"tls.crt": serving.certPEM, "tls.key": serving.keyPEM, "ca.crt": ca.certPEM} {
		if _, err := writeFile(certDir, name, data); err != nil {
			return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
		}
	}

	// The audit lists resources into files in --api-cache-dir, which must exist (the release
	// mounts an emptyDir at its default, /tmp/audit, shared by every fleet on the machine).
	auditDir := filepath.Join(c.dir, "gatekeeper-audit")
	if err := os.MkdirAll(auditDir, 0o700); err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}

	health := "127.0.0.1:" + strconv.Itoa(healthPort)
	// Flags: the release's (--exempt-namespace, --disable-opa-builtin) and those that make a
	// process of it. Gatekeeper has no leader election (it is off in its manager).
	args := []string{
		// The release's two Deployments in one process: webhook (admission), audit, status (the
		// per-pod status objects summed into templates' and constraints' status) and generate,
		// without which no template gets its constraint CRD (v3.23 creates them only there; it
		// also makes ValidatingAdmissionPolicies of CEL templates that ask for them).
		"--operation=webhook", "--operation=audit", "--operation=status", "--operation=generate",
		"--host=127.0.0.1", "--port=" + strconv.Itoa(webhookPort),
		"--disable-cert-rotation",
		"--health-addr=" + health,
		// controller-runtime's metrics server stays off (its default, "0"); Gatekeeper's own
		// Prometheus exporter always serves, on every interface: its own port.
		"--metrics-addr=0",
		"--prometheus-port=" + strconv.Itoa(prometheusPort),
		"--exempt-namespace=" + GatekeeperNamespace,
		"--disable-opa-builtin={http.send}",
		"--audit-interval=" + strconv.Itoa(int(GatekeeperAuditInterval/time.Second)),
		// Gatekeeper waits 10 s after SIGTERM by default (for a Service to drop the Pod); the
		// fleet's processes get 5 s before SIGKILL.
		"--shutdown-delay=0",
	}
	args = append(args, extraArgs...)
	p := &process{
		name: "gatekeeper " + c.Name,
		path: binary,
		env: []string{
			"POD_NAMESPACE=" + GatekeeperNamespace, "POD_NAME=" + GatekeeperPod,
			"NAMESPACE=" + GatekeeperNamespace, "CONTAINER_NAME=manager",
		},
		// Paths on this machine, not in the Pod: a pod reads its service account and a volume.
		args:    append([]string{"--kubeconfig=" + c.Kubeconfig, "--cert-dir=" + certDir, "--api-cache-dir=" + auditDir}, args...),
		logPath: filepath.Join(f.LogDir, "gatekeeper-"+c.Name+".log"),
	}

	// Its namespace and service account as the release makes them, then the Pod it reads.
	if err := applyObjects(ctx, cl, append([]*unstructured.Unstructured{release.namespace, release.serviceAccount}, release.deployments...)); err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	if err := applyObjects(ctx, cl, []*unstructured.Unstructured{gatekeeperPodObject(release.serviceAccount.GetName(), args)}); err != nil {
		return fmt.Errorf("gatekeeper %s: its Pod: %w", c.Name, err)
	}
	if err := p.start(f.launch); err != nil {
		return err
	}
	c.gatekeeper = p
	c.GatekeeperVersion = GatekeeperVersion
	c.GatekeeperMetricsURL = "http://127.0.0.1:" + strconv.Itoa(prometheusPort) + "/metrics"

	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	httpClient := &http.Client{Timeout: 2 * time.Second}
	if err := poll(ctx, 250*time.Millisecond, "Gatekeeper /readyz in "+c.Name, p, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, "http://"+health+"/readyz")
	}); err != nil {
		return err
	}

	webhook, err := urlWebhook(release.validatingWebhook, "https://127.0.0.1:"+strconv.Itoa(webhookPort), ca.certPEM)
	if err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	if err := applyObjects(ctx, cl, []*unstructured.Unstructured{webhook}); err != nil {
		return fmt.Errorf("gatekeeper %s: %w", c.Name, err)
	}
	// The validation webhook fails open (failurePolicy Ignore), so it cannot tell whether the
	// apiserver reaches Gatekeeper; the namespace-label webhook fails closed and answers without
	// any policy: a namespace that sets admission.gatekeeper.sh/ignore is refused by Gatekeeper
	// itself once the apiserver reaches it (and with "failed calling webhook" before).
	return poll(ctx, 250*time.Millisecond, "the apiserver reaching Gatekeeper's webhook in "+c.Name, p, func(ctx context.Context) (bool, error) {
		probe := namespace("gatekeeper-probe")
		probe.SetLabels(map[string]string{"admission.gatekeeper.sh/ignore": "probe"})
		err := cl.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			return false, errors.New("a namespace setting admission.gatekeeper.sh/ignore was admitted")
		}
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "Only exempt namespace can have the admission.gatekeeper.sh/ignore label") {
			return true, nil
		}
		return false, err
	})
}

// gatekeeperObjects are what the fleet takes from Gatekeeper's release manifest besides its CRDs.
type gatekeeperObjects struct {
	namespace, serviceAccount, validatingWebhook *unstructured.Unstructured
	// deployments are the release's two Deployments (webhook, audit): made as the release
	// makes them, with no replicas (the process runs instead), so that whoever reads Gatekeeper's
	// version from its Deployment's image, as policyhub's agent does, finds it.
	deployments []*unstructured.Unstructured
}

// gatekeeperRelease reads Gatekeeper's namespace, service account and validating webhook
// configuration from its release manifest in the module cache.
func gatekeeperRelease(ctx context.Context) (gatekeeperObjects, error) {
	root, err := moduleDir(ctx, gatekeeperModule)
	if err != nil {
		return gatekeeperObjects{}, err
	}
	objs, err := readObjects(filepath.Join(root, gatekeeperManifest))
	if err != nil {
		return gatekeeperObjects{}, err
	}
	var r gatekeeperObjects
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "Namespace" && obj.GetName() == GatekeeperNamespace:
			r.namespace = obj
		case obj.GetKind() == "ServiceAccount":
			r.serviceAccount = obj
		case obj.GetKind() == "ValidatingWebhookConfiguration" && obj.GetName() == GatekeeperWebhook:
			r.validatingWebhook = obj
		case obj.GetKind() == "Deployment":
			if err := unstructured.SetNestedField(obj.Object, int64(0), "spec", "replicas"); err != nil {
				return gatekeeperObjects{}, err
			}
			r.deployments = append(r.deployments, obj)
		}
	}
	if r.namespace == nil || r.serviceAccount == nil || r.validatingWebhook == nil {
		return gatekeeperObjects{}, fmt.Errorf("%s in %s: no namespace %s, service account or %s", gatekeeperManifest, gatekeeperModule, GatekeeperNamespace, GatekeeperWebhook)
	}
	return r, nil
}

// urlWebhook returns a copy of a webhook configuration whose webhooks call base + their Service
// path, trusting caPEM, instead of the Service.
func urlWebhook(cfg *unstructured.Unstructured, base string, caPEM []byte) (*unstructured.Unstructured, error) {
	cfg = cfg.DeepCopy()
	hooks, _, err := unstructured.NestedSlice(cfg.Object, "webhooks")
	if err != nil || len(hooks) == 0 {
		return nil, fmt.Errorf("%s has no webhooks (%v)", cfg.GetName(), err)
	}
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: webhook %d is not an object", cfg.GetName(), i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		// caBundle is base64 in JSON: unstructured objects carry []byte fields as that string.
		hook["clientConfig"] = map[string]any{"url": base + path, "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
		hooks[i] = hook
	}
	if err := unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks"); err != nil {
		return nil, err
	}
	return cfg, nil
}

// gatekeeperPodObject is the Pod Gatekeeper reads as its own: the release's container (image,
// security context, which gatekeeper-system's restricted Pod Security level requires) with the
// flags the process runs with. It never runs.
func gatekeeperPodObject(serviceAccount string, args []string) *unstructured.Unstructured {
	anyArgs := make([]any, len(args))
	for i, a := range args {
		anyArgs[i] = a
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": GatekeeperPod, "namespace": GatekeeperNamespace,
			"labels": map[string]any{"control-plane": "controller-manager", "gatekeeper.sh/system": "yes", "gatekeeper.sh/operation": "webhook"},
		},
		"spec": map[string]any{
			"serviceAccountName":           serviceAccount,
			"automountServiceAccountToken": false,
			"containers": []any{map[string]any{
				"name": "manager", "image": "openpolicyagent/gatekeeper:" + GatekeeperVersion,
				"command": []any{"/manager"}, "args": anyArgs,
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false,
					"capabilities":             map[string]any{"drop": []any{"ALL"}},
					"readOnlyRootFilesystem":   true,
					"runAsGroup":               int64(999), "runAsNonRoot": true, "runAsUser": int64(1000),
					"seccompProfile": map[string]any{"type": "RuntimeDefault"},
				},
			}},
		},
	}}
}
