package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/policyhub/policyhub/internal/manifests"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldManager is the field manager of everything the fleet itself writes.
const fieldManager = "policyhub-fleet"

// crdSource is a folder of CRD YAML in a module (or the checkout), and which files of it to install.
type crdSource struct {
	module string // module@version, or "" for the policyhub checkout
	// testbin, when set, is the wrapper module (e2e/testbin/<testbin>) whose go.sum verifies module.
	testbin string
	dir     string // folder inside it
	match   string // filepath.Match pattern of the files; "" for every .yaml
}

// hubCRDs are installed in the hub: policyhub's own, OCM's placement API and KubeVela's Application.
var hubCRDs = []crdSource{
	{dir: "config/crd"},
	{module: ocmAPIModule, dir: "cluster/v1", match: "*managedclusters.crd.yaml"},
	{module: ocmAPIModule, dir: "cluster/v1beta1", match: "*placements.crd.yaml"},
	{module: ocmAPIModule, dir: "cluster/v1beta1", match: "*placementdecisions.crd.yaml"},
	{module: ocmAPIModule, dir: "cluster/v1beta2", match: "*managedclustersetbindings.crd.yaml"},
	{module: kubeVelaModule, dir: "charts/vela-core/crds", match: "core.oam.dev_applications.yaml"},
	{module: kubeVelaModule, dir: "charts/vela-core/crds", match: "core.oam.dev_policydefinitions.yaml"},
}

// managedCRDs are installed in every managed cluster: Kyverno's (policies and reports) and openreports'.
var managedCRDs = []crdSource{
	{module: kyvernoModule, dir: "config/crds/kyverno"},
	{module: kyvernoModule, dir: "config/crds/policies.kyverno.io"},
	{module: kyvernoModule, dir: "config/crds/policyreport"},
	{module: kyvernoModule, dir: "config/crds/reports"},
	{module: openReportsModule, dir: "config/crd"},
}

// kyverno116CRDs replace Kyverno's in the clusters that run Kyverno 1.16 (its own CRDs, from its
// module, which e2e/testbin/kyverno-v1.16's go.sum verifies).
var kyverno116CRDs = []crdSource{
	{module: kyverno116Module, testbin: "kyverno-v1.16", dir: "config/crds/kyverno"},
	{module: kyverno116Module, testbin: "kyverno-v1.16", dir: "config/crds/policies.kyverno.io"},
	{module: kyverno116Module, testbin: "kyverno-v1.16", dir: "config/crds/policyreport"},
	{module: kyverno116Module, testbin: "kyverno-v1.16", dir: "config/crds/reports"},
	{module: openReportsModule, dir: "config/crd"},
}

// minimalHubCRDs and minimalManagedCRDs are what Options.MinimalCRDs installs: policyhub's own
// on the hub, Kyverno's ClusterPolicy in the managed clusters.
var (
	minimalHubCRDs     = []crdSource{{dir: "config/crd"}}
	minimalManagedCRDs = []crdSource{{module: kyvernoModule, dir: "config/crds/kyverno", match: "kyverno.io_clusterpolicies.yaml"}}
)

// loadCRDs reads the CRD objects of the sources.
func loadCRDs(ctx context.Context, sources []crdSource) ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	for _, src := range sources {
		var root string
		var err error
		switch {
		case src.module == "":
			root, err = repoRoot()
		case src.testbin != "":
			var repo string
			if repo, err = repoRoot(); err == nil {
				root, err = moduleDirIn(ctx, filepath.Join(repo, "e2e", "testbin", src.testbin), src.module)
			}
		default:
			root, err = moduleDir(ctx, src.module)
		}
		if err != nil {
			return nil, err
		}
		pattern := src.match
		if pattern == "" {
			pattern = "*.yaml"
		}
		files, err := filepath.Glob(filepath.Join(root, src.dir, pattern))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("no CRD files %s in %s", pattern, filepath.Join(root, src.dir))
		}
		for _, file := range files {
			objs, err := readObjects(file)
			if err != nil {
				return nil, err
			}
			for _, obj := range objs {
				if obj.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, obj)
				}
			}
		}
	}
	return crds, nil
}

// readObjects decodes every object of a (multi-document) YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return objs, nil
}

// applyObjects server-side applies objects (CRDs are too big for client-side apply's annotation).
// The objects are not changed: the same CRDs are applied to several clusters at once.
func applyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		obj := obj.DeepCopy()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// installCRDs applies the CRDs and waits until each is Established.
func installCRDs(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	if err := applyObjects(ctx, c, crds); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, crd := range crds {
		name := crd.GetName()
		err := poll(ctx, 100*time.Millisecond, "CRD "+name+" Established", nil, func(ctx context.Context) (bool, error) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := c.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
				return false, err
			}
			return conditionTrue(live, "Established"), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// conditionTrue reports whether obj's status has condition kind with status True.
func conditionTrue(obj *unstructured.Unstructured, kind string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == kind {
			return strings.EqualFold(fmt.Sprint(m["status"]), "True")
		}
	}
	return false
}
