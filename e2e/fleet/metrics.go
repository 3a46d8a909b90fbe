package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// APIServerMetrics returns the body of a kube-apiserver's /metrics (Prometheus text), read with
// cfg's credentials; the caller closes it. Tests and benchmarks count the apiserver's own
// requests with it (apiserver_request_total).
func APIServerMetrics(ctx context.Context, cfg *rest.Config) (io.ReadCloser, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s/metrics: %s", cfg.Host, resp.Status)
	}
	return resp.Body, nil
}
