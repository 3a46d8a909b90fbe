package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/gateway"
)

// Groups of the PolicyReportSummary CRD's copies: benchGroup's has no CEL rules (shape e),
// schemalessGroup's no schema for spec and status (shape i), atomicGroup's its whole schema with
// spec one atomic value to field management (shape j).
const (
	benchGroup      = "bench.policyhub.io"
	schemalessGroup = "schemaless.policyhub.io"
	atomicGroup     = "atomic.policyhub.io"
)

// crdCopies are the CRD copies installed, each with the edit that makes it.
var crdCopies = []struct {
	group string
	edit  func(crd map[string]any) error
}{
	{benchGroup, func(crd map[string]any) error {
		if removed := withoutValidations(crd["spec"]); removed == 0 {
			return fmt.Errorf("the CRD has no x-kubernetes-validations: shape e would measure nothing")
		}
		return nil
	}},
	{schemalessGroup, schemaless},
	{atomicGroup, atomicSpec},
}

// managedCluster is the managed cluster shape h writes to through the gateway.
const managedCluster = "cluster-1"

type bench struct {
	o    options
	pids fleetPIDs
	// hub, viaGateway and managed send raw requests: the hub's apiserver directly, the managed
	// cluster's through the hub's aggregation layer and the gateway, and the managed cluster's
	// directly (setup only).
	hub, viaGateway, managed rest.Interface
	dyn                      dynamic.Interface
	// watch holds the hub's watches (nil with -watchers 0).
	watch *watchers
	// start is when the bodies are stamped from; each write's times are later than the last's.
	start time.Time
}

func newBench(f *fleet.Fleet, o options, pids fleetPIDs) (*bench, error) {
	b := &bench{o: o, pids: pids, start: time.Now()}
	hubCfg := rest.CopyConfig(f.Hub.Config)
	// No client-side throttling: the apiserver is what is measured.
	hubCfg.QPS, hubCfg.Burst = 100_000, 100_000
	gwCfg, err := gateway.ClusterConfig(hubCfg, managedCluster)
	if err != nil {
		return nil, err
	}
	managedCfg := rest.CopyConfig(f.Cluster(managedCluster).Config)
	managedCfg.QPS, managedCfg.Burst = 100_000, 100_000
	for _, c := range []struct {
		cfg *rest.Config
		out *rest.Interface
	}{{hubCfg, &b.hub}, {gwCfg, &b.viaGateway}, {managedCfg, &b.managed}} {
		cs, err := kubernetes.NewForConfig(c.cfg)
		if err != nil {
			return nil, err
		}
		*c.out = cs.CoreV1().RESTClient()
	}
	if b.dyn, err = dynamic.NewForConfig(hubCfg); err != nil {
		return nil, err
	}
	return b, nil
}

func namespace(i int) string { return fmt.Sprintf("bench-%03d", i) }

func summaryPath(group, ns string) string {
	return fmt.Sprintf("/apis/%s/v1alpha1/namespaces/%s/policyreportsummaries/%s", group, ns, policyhubv1.SummaryName)
}

func configMapPath(ns string) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/configmaps/summary", ns)
}

func leasePath(ns string) string {
	return fmt.Sprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", ns, policyhubv1.AgentLeaseName)
}

// write is one PATCH.
type write struct {
	path, subresource string
	patchType         types.PatchType
	params            map[string]string
	body              []byte
}

func (w write) send(ctx context.Context, c rest.Interface) ([]byte, error) {
	// AbsPath joins the segments and drops an empty subresource.
	req := c.Patch(w.patchType).AbsPath(w.path, w.subresource)
	for k, v := range w.params {
		req = req.Param(k, v)
	}
	raw, err := req.Body(w.body).Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("PATCH %s %s: %w (%.600s)", w.path, w.subresource, err, raw)
	}
	return raw, nil
}

var agentParams = map[string]string{"fieldManager": push.FieldManager}

// setup installs the CRD copy without CEL rules and creates every namespace's objects as their
// first writes make them (the summaries applied, as an agent's first push does).
func (b *bench) setup(ctx context.Context) error {
	for _, c := range crdCopies {
		if err := b.installCRDCopy(ctx, c.group, c.edit); err != nil {
			return err
		}
	}
	errs := benchkit.InParallel(b.o.parallel, b.o.namespaces, func(i int) error {
		ns := namespace(i)
		apply, _, err := agentBodies(ns, fullSpec(b.o.policies, b.o.violations, 0, b.start), b.start)
		if err != nil {
			return err
		}
		spec, err := specJSON(apply)
		if err != nil {
			return err
		}
		nsBody := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
		cmBody, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "summary", "namespace": ns}, "data": map[string]string{configMapKey: spec}})
		if err != nil {
			return err
		}
		leaseBody := fmt.Appendf(nil, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"namespace":%q},"spec":{"holderIdentity":%q,"leaseDurationSeconds":180,"renewTime":%q}}`,
			policyhubv1.AgentLeaseName, ns, ns, metav1.NewMicroTime(b.start).Format(metav1.RFC3339Micro))
		applyParams := map[string]string{"fieldManager": push.FieldManager, "force": "true"}
		type setupWrite struct {
			c rest.Interface
			w write
		}
		writes := []setupWrite{
			{b.hub, write{path: "/api/v1/namespaces/" + ns, body: nsBody}},
			{b.hub, write{path: summaryPath(policyhubv1.GroupVersion.Group, ns), body: apply}},
		}
		for _, c := range crdCopies {
			body, err := withAPIVersion(apply, c.group+"/v1alpha1")
			if err != nil {
				return err
			}
			writes = append(writes, setupWrite{b.hub, write{path: summaryPath(c.group, ns), body: body}})
		}
		for _, w := range append(writes, []setupWrite{
			{b.hub, write{path: configMapPath(ns), body: cmBody}},
			{b.hub, write{path: leasePath(ns), body: leaseBody}},
			{b.managed, write{path: "/api/v1/namespaces/" + ns, body: nsBody}},
			{b.managed, write{path: configMapPath(ns), body: cmBody}},
		}...) {
			w.w.patchType, w.w.params = types.ApplyPatchType, applyParams
			if _, err := w.w.send(ctx, w.c); err != nil {
				return fmt.Errorf("setup: %w", err)
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d namespaces: %w", len(errs), b.o.namespaces, errs[0])
	}
	return nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDCopy installs a copy of the PolicyReportSummary CRD in group, changed by edit, and
// waits until it is Established.
func (b *bench) installCRDCopy(ctx context.Context, group string, edit func(crd map[string]any) error) error {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return fmt.Errorf("cannot tell where the policyhub checkout is")
	}
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "crd", "policyhub.io_policyreportsummaries.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(crd.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	name := "policyreportsummaries." + group
	crd.SetName(name)
	crd.SetAnnotations(nil)
	if err := unstructured.SetNestedField(crd.Object, group, "spec", "group"); err != nil {
		return err
	}
	if _, err := b.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s: %w", name, err)
	}
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		got, err := b.dyn.Resource(crdGVR).Get(deadline, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		select {
		case <-deadline.Done():
			return fmt.Errorf("CRD %s not Established in a minute", name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
