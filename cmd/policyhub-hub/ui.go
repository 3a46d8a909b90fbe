package main

import (
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/policyhub/policyhub/internal/metricsauth"
	"github.com/policyhub/policyhub/ui"
)

// addUI adds the web view to the manager when --ui-bind-address is set (ui.InCluster: HTTPS,
// behind the hub's apiserver's authentication and authorization, for tokens of --ui-auth-audiences).
func addUI(mgr manager.Manager, config *rest.Config, o options) error {
	if o.uiAddr == "" || o.uiAddr == "0" {
		return nil
	}
	return mgr.Add(&ui.InCluster{Addr: o.uiAddr, CertDir: o.uiCertDir, GatewaySecretNamespace: o.secretNamespace, Config: config,
		Log: mgr.GetLogger().WithName("ui"), Auth: metricsauth.Options{Audiences: audiences(o.uiAudiences)}})
}
