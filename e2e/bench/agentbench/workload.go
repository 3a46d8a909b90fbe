package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/e2e/bench/benchkit"
)

var policyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}

var severities = []string{"high", "medium", "low"}

// workload is the cluster's content: resources ConfigMaps spread over namespaces, each of an
// application, each with one PolicyReport of perReport results (one per policy; every tenth fails).
type workload struct {
	resources, perReport, namespaces, apps int
	// uids are the resources' UIDs, which name their reports (as Kyverno names them).
	uids []types.UID
}

func newWorkload(o options) *workload {
	n := o.results / o.perReport
	return &workload{resources: n, perReport: o.perReport, namespaces: o.namespaces, apps: o.apps, uids: make([]types.UID, n)}
}

func (w *workload) results() int { return w.resources * w.perReport }

func (w *workload) namespace(i int) string { return fmt.Sprintf("bench-%03d", i%w.namespaces) }

// app is the resource's application; each namespace holds apps/namespaces of them.
func (w *workload) app(i int) string {
	return fmt.Sprintf("app-%04d", (i/w.namespaces)%(w.apps/w.namespaces)*w.namespaces+i%w.namespaces)
}

func policy(j int) string { return fmt.Sprintf("bench-policy-%02d", j) }

// fails says whether result j of resource i fails: one in ten.
func fails(i, j int) bool { return (i+j)%10 == 0 }

// write creates the namespaces, the resources and their reports, parallel at a time.
func (w *workload) write(ctx context.Context, cfg *rest.Config, parallel int) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range w.namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	errs := benchkit.InParallel(parallel, w.resources, func(i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace(i), Name: fmt.Sprintf("res-%06d", i), Labels: map[string]string{"app.oam.dev/name": w.app(i)}},
			Data:       map[string]string{"k": "v"},
		}
		created, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		w.uids[i] = created.UID
		if _, err := dyn.Resource(policyReports).Namespace(cm.Namespace).Create(ctx, w.report(i, created.Name, -1), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the PolicyReport of %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// report is resource i's PolicyReport as Kyverno's reports controller writes it: named by the
// resource's UID, scoped to it, one result per policy. Result flip, when ≥ 0, fails whatever
// fails says (a change to time).
func (w *workload) report(i int, name string, flip int) *unstructured.Unstructured {
	results := make([]any, w.perReport)
	pass, fail := int64(0), int64(0)
	for j := range w.perReport {
		result := "pass"
		if fails(i, j) || j == flip {
			result = "fail"
			fail++
		} else {
			pass++
		}
		results[j] = map[string]any{
			"policy":   policy(j),
			"rule":     "check",
			"result":   result,
			"message":  fmt.Sprintf("validation error: the resource does not satisfy %s; rule check failed at path /metadata/labels/team/", policy(j)),
			"severity": severities[j%len(severities)],
			"category": "Best Practices",
			"source":   "kyverno",
			"scored":   true,
			"timestamp": map[string]any{
				"seconds": int64(1_764_000_000 + i), "nanos": int64(0),
			},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "PolicyReport",
		"metadata": map[string]any{
			"namespace": w.namespace(i),
			"name":      string(w.uids[i]),
			"labels":    map[string]any{"app.kubernetes.io/managed-by": "kyverno"},
		},
		"scope": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "namespace": w.namespace(i), "name": name, "uid": string(w.uids[i]),
		},
		"results": results,
		"summary": map[string]any{"pass": pass, "fail": fail, "warn": int64(0), "error": int64(0), "skip": int64(0)},
	}}
}

// failures is the number of failing results before any change.
func (w *workload) failures() int64 {
	var n int64
	for i := range w.resources {
		for j := range w.perReport {
			if fails(i, j) {
				n++
			}
		}
	}
	return n
}

// simpleSeries is how many series policy-reporter's simple mode would export: one per distinct
// namespace, policy, status, severity, category and source.
func (w *workload) simpleSeries() int {
	type key struct {
		ns, policy, status, severity string
	}
	seen := map[key]bool{}
	for i := range w.resources {
		for j := range w.perReport {
			status := "pass"
			if fails(i, j) {
				status = "fail"
			}
			seen[key{w.namespace(i), policy(j), status, severities[j%len(severities)]}] = true
		}
	}
	return len(seen)
}
