package fleet

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// fluxCRDs are source-controller's CRDs, all of them: it watches every kind it serves.
var fluxCRDs = []crdSource{{module: sourceCtrlModule, dir: "config/crd/bases"}}

// FluxNamespace is where the fleet's tests put their Flux sources.
const FluxNamespace = "flux-system"

// startSourceController runs Flux's source-controller against the hub as a local process: it
// reconciles the hub's GitRepositories, OCIRepositories and Buckets and serves their artifacts on
// 127.0.0.1, advertising that address in their status.artifact.url (as it advertises its Service
// in a cluster).
func (f *Fleet) startSourceController(ctx context.Context, b binaries) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	storageDir := filepath.Join(f.Dir, "flux-storage")
	if err := os.MkdirAll(storageDir, 0o700); err != nil {
		return fmt.Errorf("source-controller storage: %w", err)
	}
	storage := "127.0.0.1:" + strconv.Itoa(ports[0])
	health := "127.0.0.1:" + strconv.Itoa(ports[2])
	f.flux = &process{
		name: "source-controller",
		path: b.sourceController,
		env:  []string{"KUBECONFIG=" + f.Hub.Kubeconfig, "RUNTIME_NAMESPACE=" + FluxNamespace},
		args: []string{
			"--storage-path=" + storageDir, "--storage-addr=" + storage, "--storage-adv-addr=" + storage,
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[1]), "--health-addr=" + health,
			"--enable-leader-election=false", "--log-level=debug",
		},
		logPath: filepath.Join(f.LogDir, "source-controller.log"),
	}
	if err := f.flux.start(f.launch); err != nil {
		return err
	}
	f.FluxStorage = "http://" + storage
	httpClient := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, 200*time.Millisecond, "source-controller ready", f.flux, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, "http://"+health+"/readyz")
	})
}
