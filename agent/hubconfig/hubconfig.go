// Package hubconfig loads the agent's hub kubeconfig so that a rotated token is used without a
// restart: the agent's hub identity is a ServiceAccount token minted on the hub, which should be
// short-lived, and whoever rotates it rewrites the kubeconfig (the chart mounts it from a Secret,
// which the kubelet updates in place).
//
// A token written in the kubeconfig (`token:`) is read from the file again at most every minute
// and at once after the hub answers 401; a rewrite without a token keeps the last one read until
// the hub refuses it. A kubeconfig with `tokenFile:` needs nothing more:
// client-go reads that file again every minute. Other credentials (client certificates, exec
// plugins) are left to client-go, and a new server or CA takes a restart.
package hubconfig

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// rereadPeriod is how long a token read from the kubeconfig is used before the file is read
// again (client-go's for token files); a 401 ends it at once.
const rereadPeriod = time.Minute

// Load returns the config of the kubeconfig at path, its bearer token re-read as it changes.
func Load(path string) (*rest.Config, error) {
	return load(path, time.Now)
}

func load(path string, now func() time.Time) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	if cfg.BearerToken == "" || cfg.BearerTokenFile != "" {
		return cfg, nil
	}
	source := transport.NewCachedTokenSource(&kubeconfigToken{path: path, now: now})
	if _, err := source.Token(); err != nil {
		return nil, err
	}
	// The token now comes from the source, not from the config.
	cfg.BearerToken = ""
	wrap := transport.ResettableTokenSourceWrapTransport(source)
	if inner := cfg.WrapTransport; inner != nil {
		wrap = transport.Wrappers(inner, wrap)
	}
	cfg.WrapTransport = wrap
	return cfg, nil
}

// kubeconfigToken reads the bearer token of a kubeconfig file.
type kubeconfigToken struct {
	path string
	now  func() time.Time
}

func (k *kubeconfigToken) Token() (*oauth2.Token, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", k.path)
	if err != nil {
		return nil, fmt.Errorf("read the hub kubeconfig again: %w", err)
	}
	token := cfg.BearerToken
	if token == "" && cfg.BearerTokenFile != "" {
		data, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("read the hub kubeconfig's token file: %w", err)
		}
		token = string(data)
	}
	if token = strings.TrimSpace(token); token == "" {
		return nil, errors.New("the hub kubeconfig no longer holds a token")
	}
	return &oauth2.Token{AccessToken: token, Expiry: k.now().Add(rereadPeriod)}, nil
}
