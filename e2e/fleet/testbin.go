package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Versions of the real parts the fleet runs; hack/testbin.sh builds the same ones.
const (
	// EtcdVersion is 3.6, not Debian's 3.4: kube-apiserver 1.36 uses RequestWatchProgress, without
	// which watches that start with no resourceVersion can fail with "Too large resource version".
	EtcdVersion           = "v3.6.8"
	KubernetesVersion     = "v1.36.3"
	ClusterGatewayVersion = "v1.9.1"
	KyvernoVersion        = "v1.19.1"
	// Kyverno116Version is the Kyverno a cluster runs with ManagedCluster.KyvernoVersion set to it:
	// the oldest a real fleet still runs, serving the CEL policy kinds only as v1beta1.
	Kyverno116Version = "v1.16.3"
	// SourceControllerVersion is Flux's source-controller (v1.9.3: the newest the module proxy
	// serves whole, see FIELD-NOTES).
	SourceControllerVersion = "v1.9.3"

	openReportsModule = "github.com/openreports/reports-api@v0.2.1"
	ocmAPIModule      = "open-cluster-management.io/api@v1.1.0"
	kubeVelaModule    = "github.com/oam-dev/kubevela@" + KubeVelaVersion
	kyvernoModule     = "github.com/kyverno/kyverno@" + KyvernoVersion
	kyverno116Module  = "github.com/kyverno/kyverno@" + Kyverno116Version
	sourceCtrlModule  = "github.com/fluxcd/source-controller@" + SourceControllerVersion
)

// binaries are the paths of the programs a fleet runs.
type binaries struct {
	etcd, kubeAPIServer, kubeControllerManager, clusterGateway, velaCore, sourceController, gatekeeper string
	// kyverno are Kyverno's admission and reports controllers, by Kyverno version.
	kyverno map[string]kyvernoBinaries
}

// kyvernoBinaries are one Kyverno version's controllers.
type kyvernoBinaries struct{ admission, reports string }

// TestbinDir is where `make testbin` puts the binaries: $POLICYHUB_TESTBIN, or
// <user cache dir>/policyhub/testbin.
func TestbinDir() (string, error) {
	if dir := os.Getenv("POLICYHUB_TESTBIN"); dir != "" {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testbin directory: %w", err)
	}
	return filepath.Join(cache, "policyhub", "testbin"), nil
}

// KyvernoCLI is the path of the Kyverno CLI (`kyverno oci push`), built by `make testbin` from the
// same module as the fleet's Kyverno.
func KyvernoCLI() (string, error) {
	dir, err := TestbinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kyverno-"+KyvernoVersion, "kyverno-cli")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make testbin` to build the fleet's binaries", path)
	}
	return path, nil
}

// findBinaries locates the programs, all in the testbin directory at the versions above (never
// one on PATH, such as Debian's older etcd, so every run sees the same parts); Kyverno's only of
// the kyvernoVersions asked for (it is the slowest to build), vela-core only when withKubeVela,
// source-controller only when withFlux, Gatekeeper only when withGatekeeper.
func findBinaries(kyvernoVersions []string, withKubeVela, withControllerManager, withFlux, withGatekeeper bool) (binaries, error) {
	dir, err := TestbinDir()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{
		etcd:                  filepath.Join(dir, "etcd-"+EtcdVersion, "etcd"),
		kubeAPIServer:         filepath.Join(dir, "kube-apiserver-"+KubernetesVersion, "kube-apiserver"),
		kubeControllerManager: filepath.Join(dir, "kube-apiserver-"+KubernetesVersion, "kube-controller-manager"),
		clusterGateway:        filepath.Join(dir, "cluster-gateway-"+ClusterGatewayVersion, "cluster-gateway"),
		kyverno:               map[string]kyvernoBinaries{},
		velaCore:              filepath.Join(dir, "kubevela-"+KubeVelaVersion, "vela-core"),
		sourceController:      filepath.Join(dir, "source-controller-"+SourceControllerVersion, "source-controller"),
		gatekeeper:            filepath.Join(dir, "gatekeeper-"+GatekeeperVersion, "gatekeeper"),
	}
	need := []string{b.etcd, b.kubeAPIServer, b.clusterGateway}
	for _, version := range kyvernoVersions {
		k := kyvernoBinaries{admission: filepath.Join(dir, "kyverno-"+version, "kyverno"), reports: filepath.Join(dir, "kyverno-"+version, "reports-controller")}
		b.kyverno[version] = k
		need = append(need, k.admission, k.reports)
	}
	if withKubeVela {
		need = append(need, b.velaCore)
	}
	if withControllerManager {
		need = append(need, b.kubeControllerManager)
	}
	if withFlux {
		need = append(need, b.sourceController)
	}
	if withGatekeeper {
		need = append(need, b.gatekeeper)
	}
	for _, path := range need {
		if _, err := os.Stat(path); err != nil {
			return binaries{}, fmt.Errorf("%s is missing: run `make testbin` to build the fleet's binaries", path)
		}
	}
	return b, nil
}

// moduleDir returns the folder of module@version in the Go module cache, downloading it if needed
// (`make testbin` downloads them ahead, so tests do not).
func moduleDir(ctx context.Context, moduleAtVersion string) (string, error) {
	// Outside any module, so the project's go.mod is neither read nor changed.
	return moduleDirIn(ctx, os.TempDir(), moduleAtVersion)
}

// moduleDirIn is moduleDir from within the module in dir, whose go.sum verifies the download (for
// a module the checksum database does not have, such as Kyverno v1.16.3).
func moduleDirIn(ctx context.Context, dir, moduleAtVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr != nil && err == nil {
		err = jsonErr
	}
	if err != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", moduleAtVersion, err, info.Error)
	}
	return info.Dir, nil
}

// repoRoot is the policyhub checkout this package was compiled from (for config/crd).
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot tell where the policyhub checkout is")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "config", "crd")); err != nil {
		return "", fmt.Errorf("policyhub checkout at %s has no config/crd: %w", root, err)
	}
	return root, nil
}

// KubectlPath is the kubectl `make testbin` builds, of the fleet's Kubernetes version.
func KubectlPath() (string, error) {
	return testbinProgram("kube-apiserver-"+KubernetesVersion, "kubectl")
}

// VelaPath is KubeVela's CLI (vela) `make testbin` builds, of the fleet's vela-core version.
func VelaPath() (string, error) {
	return testbinProgram("kubevela-"+KubeVelaVersion, "vela")
}

// testbinProgram is a program `make testbin` built into dir of the testbin directory.
func testbinProgram(dir, name string) (string, error) {
	root, err := TestbinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make testbin`", path)
	}
	return path, nil
}
