package fleet

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
)

// gatewayServiceName is the Service the hub's aggregation layer resolves the gateway through.
const gatewayServiceName = "cluster-gateway"

// startGateway starts cluster-gateway against the hub and registers it as the hub's
// cluster.core.oam.dev/v1alpha1 APIService (ExternalName Service → localhost:<port>).
func (f *Fleet) startGateway(ctx context.Context, binary string, ca *certAuthority) error {
	dir := filepath.Join(f.Dir, "gateway")
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	// The aggregator verifies the Service's DNS name; direct clients use 127.0.0.1.
	serving, err := ca.serving("cluster-gateway", gatewayServiceName+"."+f.SecretNamespace+".svc")
	if err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	certFile, err := writeFile(f.Hub.dir, "gateway-tls.crt", serving.certPEM)
	if err != nil {
		return err
	}
	keyFile, err := writeFile(f.Hub.dir, "gateway-tls.key", serving.keyPEM)
	if err != nil {
		return err
	}
	f.gateway = &process{
		name: "cluster-gateway",
		path: binary,
		args: []string{
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + dir,
			"--tls-cert-file=" + certFile,
			"--tls-private-key-file=" + keyFile,
			"--kubeconfig=" + f.Hub.Kubeconfig,
			"--authentication-kubeconfig=" + f.Hub.Kubeconfig,
			"--authorization-kubeconfig=" + f.Hub.Kubeconfig,
			"--secret-namespace=" + f.SecretNamespace,
		},
		logPath: filepath.Join(f.LogDir, "cluster-gateway.log"),
	}
	f.GatewayURL = "https://127.0.0.1:" + strconv.Itoa(port)

	hub, err := client.New(f.Hub.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	if err := applyObjects(ctx, hub, []*unstructured.Unstructured{namespace(f.SecretNamespace)}); err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	if err := f.gateway.start(f.launch); err != nil {
		return err
	}
	healthCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	httpClient, err := rest.HTTPClientFor(f.GatewayConfig())
	if err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	err = poll(healthCtx, 100*time.Millisecond, "cluster-gateway /healthz", f.gateway, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, f.GatewayURL+"/healthz")
	})
	if err != nil {
		return err
	}

	service := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": gatewayServiceName, "namespace": f.SecretNamespace},
		"spec": map[string]any{
			"type":         "ExternalName",
			"externalName": "localhost",
			"ports":        []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}},
		},
	}}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": gateway.Version + "." + gateway.Group},
		"spec": map[string]any{
			"group":                gateway.Group,
			"version":              gateway.Version,
			"service":              map[string]any{"namespace": f.SecretNamespace, "name": gatewayServiceName, "port": int64(port)},
			"caBundle":             base64.StdEncoding.EncodeToString(ca.certPEM),
			"groupPriorityMinimum": int64(2000),
			"versionPriority":      int64(10),
		},
	}}
	if err := applyObjects(ctx, hub, []*unstructured.Unstructured{service, apiService}); err != nil {
		return fmt.Errorf("cluster-gateway: %w", err)
	}
	availCtx, cancelAvail := context.WithTimeout(ctx, 60*time.Second)
	defer cancelAvail()
	return poll(availCtx, 200*time.Millisecond, "APIService "+apiService.GetName()+" Available", f.gateway, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(apiService.GroupVersionKind())
		if err := hub.Get(ctx, types.NamespacedName{Name: apiService.GetName()}, live); err != nil {
			return false, err
		}
		return conditionTrue(live, "Available"), nil
	})
}

// GatewayConfig reaches cluster-gateway directly (not through the hub's aggregation layer) as the
// hub's admin; the gateway checks the token with the hub.
func (f *Fleet) GatewayConfig() *rest.Config {
	cfg := rest.CopyConfig(f.Hub.Config)
	cfg.Host = f.GatewayURL
	return cfg
}

// registerCluster writes the managed cluster's credential Secret in the gateway's secret
// namespace, with the cluster's labels on it.
func (f *Fleet) registerCluster(ctx context.Context, hub client.Client, c *Cluster) error {
	labels := map[string]any{gateway.CredentialTypeLabel: gateway.CredentialTypeServiceAccountToken}
	for k, v := range c.Labels {
		labels[k] = v
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": c.Name, "namespace": f.SecretNamespace, "labels": labels},
		"type":       string(corev1.SecretTypeOpaque),
		"stringData": map[string]any{"endpoint": c.URL, "ca.crt": string(c.CAData), "token": c.token},
	}}
	if err := applyObjects(ctx, hub, []*unstructured.Unstructured{secret}); err != nil {
		return fmt.Errorf("register cluster %s: %w", c.Name, err)
	}
	return nil
}

// SetClusterLabels replaces a managed cluster's labels on its gateway credential Secret.
func (f *Fleet) SetClusterLabels(ctx context.Context, name string, labels map[string]string) error {
	c := f.Cluster(name)
	if c == nil {
		return fmt.Errorf("no managed cluster %q in this fleet", name)
	}
	hub, err := client.New(f.Hub.Config, client.Options{})
	if err != nil {
		return err
	}
	c.Labels = maps.Clone(labels)
	return f.registerCluster(ctx, hub, c)
}

// waitProxied waits until the hub proxies requests to the managed cluster through the gateway.
func (f *Fleet) waitProxied(ctx context.Context, c *Cluster) error {
	cfg, err := gateway.ClusterConfig(f.Hub.Config, c.Name)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return poll(ctx, 200*time.Millisecond, "cluster "+c.Name+" through the gateway", f.gateway, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, cfg.Host+"/version")
	})
}

func namespace(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	}}
}

// GatewayKubeconfig writes (once) and returns a kubeconfig that reaches the managed cluster through
// the gateway, via the hub's aggregation layer, as the hub's admin: what kubectl users of the hub
// would use.
func (f *Fleet) GatewayKubeconfig(cluster string) (string, error) {
	cfg, err := gateway.ClusterConfig(f.Hub.Config, cluster)
	if err != nil {
		return "", err
	}
	path := filepath.Join(f.Dir, "gateway-"+cluster+".kubeconfig")
	if err := writeKubeconfig(path, cluster, cfg); err != nil {
		return "", err
	}
	return path, nil
}
