package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
)

// directClient reaches a cluster of the fleet directly, not through the gateway.
func directClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	return c
}

// gatewayClient reaches a managed cluster through cluster-gateway, via the hub's aggregation layer.
func gatewayClient(t *testing.T, cluster string) client.Client {
	t.Helper()
	cfg, err := gateway.ClusterConfig(fleetOf(t).Hub.Config, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return directClient(t, cfg)
}

// object decodes a YAML manifest.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("decode manifest: %v\n%s", err, manifest)
	}
	return u
}

// apply server-side applies obj with field manager policyhub.
func apply(ctx context.Context, t *testing.T, c client.Client, obj *unstructured.Unstructured) {
	t.Helper()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("policyhub"), client.ForceOwnership); err != nil {
		t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// createNamespace creates a namespace directly in a cluster and deletes it when the test ends.
func createNamespace(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The fleet's namespace controller finishes the deletion; tests do not wait for it.
		_ = c.Delete(context.Background(), ns)
	})
}

// eventually polls check every interval until it returns nil or the deadline passes, then fails
// with check's last error.
func eventually(t *testing.T, timeout, interval time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testScheme knows the Kubernetes types and policyhub's.
var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(policyhubv1.AddToScheme(s))
	utilruntime.Must(placement.AddToScheme(s))
	return s
}()

// listAll lists every object (no selector).
var listAll = metav1.ListOptions{}

// deploymentsMatch is a ValidatingPolicy's matchConstraints for the Deployments of namespace ns
// (created or updated), as YAML indented by indent spaces, ending in a newline.
func deploymentsMatch(ns string, indent int) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	for _, line := range []string{
		"matchConstraints:", "  resourceRules:", "  - apiGroups: [apps]", "    apiVersions: [v1]", "    operations: [CREATE, UPDATE]",
		"    resources: [deployments]", "  namespaceSelector:", "    matchLabels: {kubernetes.io/metadata.name: " + ns + "}",
	} {
		b.WriteString(pad + line + "\n")
	}
	return b.String()
}
