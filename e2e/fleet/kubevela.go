package fleet

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/policyhub/policyhub/internal/manifests"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeVelaVersion is the vela-core the fleet runs with Options.KubeVela.
const KubeVelaVersion = "v1.10.6"

// KubeVelaSystemNamespace is where KubeVela looks for its definitions.
const KubeVelaSystemNamespace = "vela-system"

// kubeVelaCRDs are all of vela-core's CRDs: the controller needs every one of them, where the
// hub without it needs only the Application and PolicyDefinition kinds.
var kubeVelaCRDs = []crdSource{{module: kubeVelaModule, dir: "charts/vela-core/crds"}}

// kubeVelaDefinitions are the definitions of KubeVela's chart that the fleet installs: a
// component (webservice), the multi-cluster policy and step (topology, deploy), and the trait
// that turns off health checks (no kubelet runs here, so no workload ever becomes healthy).
var kubeVelaDefinitions = []string{"webservice.yaml", "topology.yaml", "deploy.yaml", "annotations.yaml"}

// startKubeVela runs vela-core against the hub as a local process, with cluster-gateway (the
// fleet's cluster Secrets are its clusters), installs the definitions, and waits until it is ready.
func (f *Fleet) startKubeVela(ctx context.Context, b binaries) error {
	hub, err := client.New(f.Hub.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("kubevela: %w", err)
	}
	defs, err := kubeVelaDefinitionObjects(ctx)
	if err != nil {
		return err
	}
	if err := applyObjects(ctx, hub, append([]*unstructured.Unstructured{namespace(KubeVelaSystemNamespace)}, defs...)); err != nil {
		return fmt.Errorf("kubevela definitions: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("kubevela: %w", err)
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[1])
	f.vela = &process{
		name: "vela-core",
		path: b.velaCore,
		env:  []string{"KUBECONFIG=" + f.Hub.Kubeconfig},
		args: []string{
			"--use-webhook=false", "--enable-cluster-gateway=true", "--enable-leader-election=false",
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]), "--health-addr=" + health,
			// Its periodic resync, short so that tests see several (status must survive them).
			"--application-re-sync-period=" + KubeVelaResync.String(),
		},
		logPath: filepath.Join(f.LogDir, "vela-core.log"),
	}
	if err := f.vela.start(f.launch); err != nil {
		return err
	}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, 200*time.Millisecond, "vela-core ready", f.vela, func(ctx context.Context) (bool, error) {
		return getOK(ctx, httpClient, "http://"+health+"/readyz")
	})
}

// KubeVelaResync is vela-core's --application-re-sync-period in the fleet.
const KubeVelaResync = 10 * time.Second

// kubeVelaDefinitionObjects reads the definitions from KubeVela's chart in the module cache. They
// are Helm templates whose only templated value is the definitions' namespace.
func kubeVelaDefinitionObjects(ctx context.Context) ([]*unstructured.Unstructured, error) {
	root, err := moduleDir(ctx, kubeVelaModule)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, name := range kubeVelaDefinitions {
		path := filepath.Join(root, "charts/vela-core/templates/defwithtemplate", name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("kubevela definition: %w", err)
		}
		data = bytes.ReplaceAll(data, []byte(`{{ include "systemDefinitionNamespace" . }}`), []byte(KubeVelaSystemNamespace))
		decoded, err := manifests.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("kubevela definition %s: %w", path, err)
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}
