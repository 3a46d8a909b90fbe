package gateway

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
)

const (
	// Group and Version of cluster-gateway's aggregated API.
	Group   = "cluster.core.oam.dev"
	Version = "v1alpha1"

	// CredentialTypeLabel marks a Secret in the gateway's secret namespace as a cluster credential;
	// its value is ServiceAccountToken or X509Certificate.
	CredentialTypeLabel = "cluster.core.oam.dev/cluster-credential-type"
	// CredentialTypeServiceAccountToken is a credential Secret holding a bearer token.
	CredentialTypeServiceAccountToken = "ServiceAccountToken"
	// CredentialTypeX509Certificate is a credential Secret holding a client certificate.
	CredentialTypeX509Certificate = "X509Certificate"

	// DefaultSecretNamespace is where KubeVela installs cluster-gateway's credential Secrets.
	DefaultSecretNamespace = "vela-system"
)

// ProxyPath is the path prefix under which the gateway proxies requests to cluster: the original
// request path follows it.
func ProxyPath(cluster string) string {
	return "/apis/" + Group + "/" + Version + "/clustergateways/" + cluster + "/proxy"
}

// ClusterConfig returns a rest.Config that reaches the managed cluster through the gateway. base
// reaches the gateway: the hub's config (through the hub's aggregation layer) or a config for the
// gateway's own URL with a hub identity. Discovery and RESTMappers built on the result see the
// managed cluster's APIs, not the hub's.
func ClusterConfig(base *rest.Config, cluster string) (*rest.Config, error) {
	// The name becomes part of a URL path: refuse anything that is not a valid object name.
	if errs := validation.IsDNS1123Subdomain(cluster); len(errs) > 0 {
		return nil, fmt.Errorf("cluster name %q: %s", cluster, strings.Join(errs, "; "))
	}
	cfg := rest.CopyConfig(base)
	cfg.Host = strings.TrimSuffix(base.Host, "/") + ProxyPath(cluster)
	return cfg, nil
}
