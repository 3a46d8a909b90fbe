package gateway

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestClusterConfig(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:6443/", BearerToken: "t"}
	tests := []struct {
		cluster, wantHost, wantErr string
	}{
		{cluster: "prod-1", wantHost: "https://127.0.0.1:6443/apis/cluster.core.oam.dev/v1alpha1/clustergateways/prod-1/proxy"},
		{cluster: "eu.west", wantHost: "https://127.0.0.1:6443/apis/cluster.core.oam.dev/v1alpha1/clustergateways/eu.west/proxy"},
		{cluster: "", wantErr: "cluster name \"\""},
		{cluster: "a/../b", wantErr: "a lowercase RFC 1123 subdomain"},
		{cluster: "Prod", wantErr: "a lowercase RFC 1123 subdomain"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			cfg, err := ClusterConfig(base, tt.cluster)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ClusterConfig(%q) error = %v, want one containing %q", tt.cluster, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClusterConfig(%q): %v", tt.cluster, err)
			}
			if cfg.Host != tt.wantHost {
				t.Errorf("Host = %q, want %q", cfg.Host, tt.wantHost)
			}
			if cfg.BearerToken != "t" {
				t.Errorf("credentials were not carried over")
			}
			if base.Host != "https://127.0.0.1:6443/" {
				t.Errorf("base config was modified: %q", base.Host)
			}
		})
	}
}
