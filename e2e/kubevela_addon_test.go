package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// policyhub's KubeVela addon (config/kubevela/addons/policyhub) holds config/kubevela's
// definitions, and `vela addon enable` of it installs them on the hub as KubeVela users install
// things: the kyverno-policy policy type and the kyverno-policy-ready step in vela-system, as
// config/kubevela has them, and the addon's Application running.
func TestKubeVelaAddonInstallsTheDefinitions(t *testing.T) {
	ctx := testContext(t)
	addon, err := filepath.Abs(filepath.Join("..", "config", "kubevela", "addons", "policyhub"))
	if err != nil {
		t.Fatal(err)
	}
	configs, err := filepath.Glob(filepath.Join("..", "config", "kubevela", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("config/kubevela/*.yaml: %v (%d files)", err, len(configs))
	}
	for _, config := range configs {
		want, err := os.ReadFile(config)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(addon, "definitions", filepath.Base(config)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("the addon's definitions/%s is not %s (read: %v): copy it again", filepath.Base(config), config, err)
		}
	}

	vela, err := fleet.VelaPath()
	if err != nil {
		t.Fatal(err)
	}
	// Other tests apply the same definitions directly: the addon takes them over.
	cmd := exec.CommandContext(ctx, vela, "addon", "enable", addon, "--override-definitions", "--yes")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+fleetOf(t).Hub.Kubeconfig)
	out, err := cmd.CombinedOutput()
	t.Logf("vela addon enable:\n%s", out)
	if err != nil {
		t.Fatalf("vela addon enable %s: %v", addon, err)
	}
	t.Cleanup(func() {
		cmd := exec.Command(vela, "addon", "disable", "policyhub", "--force")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+fleetOf(t).Hub.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("vela addon disable policyhub: %v\n%s", err, out)
			return
		}
		// vela returns before vela-core has deleted what the addon installed (its Application's
		// finalizer deletes the definitions first): the next test's definitions, applied sooner,
		// would be deleted under it. Gone, the Application has deleted them.
		hub := directClient(t, fleetOf(t).Hub.Config)
		eventually(t, 60*time.Second, 200*time.Millisecond, "the addon's Application gone", func() error {
			app := &unstructured.Unstructured{}
			app.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"})
			err := hub.Get(context.Background(), client.ObjectKey{Namespace: fleet.KubeVelaSystemNamespace, Name: "addon-policyhub"}, app)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errorf("still there (%v)", err)
		})
	})

	hub := directClient(t, fleetOf(t).Hub.Config)
	for _, config := range configs {
		want := object(t, string(mustRead(t, config)))
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		if err := hub.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
			t.Errorf("%s %s/%s after enabling the addon: %v", want.GetKind(), want.GetNamespace(), want.GetName(), err)
			continue
		}
		if !reflect.DeepEqual(live.Object["spec"], want.Object["spec"]) {
			t.Errorf("%s %s: the addon installed a spec other than %s's", want.GetKind(), want.GetName(), config)
		}
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"})
	eventually(t, 60*time.Second, 200*time.Millisecond, "the addon's Application running", func() error {
		if err := hub.Get(ctx, client.ObjectKey{Namespace: fleet.KubeVelaSystemNamespace, Name: "addon-policyhub"}, app); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(app.Object, "status", "status"); phase != "running" {
			return errorf("phase %q", phase)
		}
		return nil
	})
	if !strings.Contains(string(out), "enabled successfully") {
		t.Errorf("vela addon enable did not say the addon was enabled:\n%s", out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
