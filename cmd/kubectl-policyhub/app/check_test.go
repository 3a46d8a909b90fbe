package app

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheckDecodeMultiDocumentListsAndEmptyDocuments(t *testing.T) {
	input := `
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: one}
---
# only a comment
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: two}
- apiVersion: v1
  kind: Service
  metadata: {name: three, namespace: other}
---
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "four"}}
`
	objs, err := checkDecode("in.yaml", strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if strings.Join(got, " ") != "Deployment/one ConfigMap/two Service/three Namespace/four" {
		t.Errorf("objects %v", got)
	}

	for input, want := range map[string]string{
		"metadata: {name: x}\n":                                  "in.yaml: document 1: an object needs apiVersion and kind",
		"apiVersion: v1\nkind: ConfigMap\n":                      "needs metadata.name",
		"apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n: [": "in.yaml: document 2",
	} {
		if _, err := checkDecode("in.yaml", strings.NewReader(input)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", input, err, want)
		}
	}
}

func TestCheckReadFilesDirectoriesAndStdin(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	write("a.json", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}`)
	write("notes.txt", "not a manifest")
	objs, err := checkRead([]string{dir, "-"}, strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("names %v", names)
	}
	if _, err := checkRead([]string{filepath.Join(dir, "missing.yaml")}, nil); err == nil {
		t.Error("a missing file is no error")
	}
}

func TestCheckClassify(t *testing.T) {
	kyverno := apierrors.NewBadRequest("admission webhook \"validate.kyverno.svc-fail\" denied the request: \n\nresource Deployment/ns/web was blocked\n")
	if result, msg := checkClassify(kyverno, "ns", nil); result != checkDenied || !strings.HasPrefix(msg, `admission webhook "validate.kyverno.svc-fail" denied the request:`) || strings.HasSuffix(msg, "\n") {
		t.Errorf("Kyverno's denial: %s %q", result, msg)
	}
	if result, _ := checkClassify(apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "web", errors.New("no")), "ns", nil); result != checkDenied {
		t.Errorf("forbidden: %s", result)
	}
	if result, _ := checkClassify(apierrors.NewServiceUnavailable("gateway down"), "ns", nil); result != checkError {
		t.Errorf("503: %s", result)
	}
	if result, _ := checkClassify(errors.New("connection refused"), "ns", nil); result != checkError {
		t.Errorf("transport error: %s", result)
	}
	missingNS := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "new-ns")
	if result, msg := checkClassify(missingNS, "new-ns", map[string]bool{"new-ns": true}); result != checkError || !strings.Contains(msg, "the input creates it") {
		t.Errorf("namespace the input creates: %s %q", result, msg)
	}
	if result, _ := checkClassify(missingNS, "new-ns", nil); result != checkDenied {
		t.Errorf("missing namespace: %s", result)
	}
	if result, msg := checkClassify(nil, "ns", nil); result != checkAllowed || msg != "" {
		t.Errorf("nil: %s %q", result, msg)
	}
}

func TestCheckWarningsArePerRequest(t *testing.T) {
	h := checkWarningHandler{}
	a, b := &checkWarnings{}, &checkWarnings{}
	ctxA := context.WithValue(context.Background(), checkWarningsKey{}, a)
	ctxB := context.WithValue(context.Background(), checkWarningsKey{}, b)
	h.HandleWarningHeaderWithContext(ctxA, 299, "-", "policy x: audit failure")
	h.HandleWarningHeaderWithContext(ctxA, 299, "-", "policy x: audit failure")
	h.HandleWarningHeaderWithContext(ctxB, 299, "-", "deprecated")
	h.HandleWarningHeaderWithContext(context.Background(), 299, "-", "discovery warning") // no collector: dropped
	if got := a.list(); len(got) != 1 || got[0] != "policy x: audit failure" {
		t.Errorf("a: %q", got)
	}
	if got := b.list(); len(got) != 1 || got[0] != "deprecated" {
		t.Errorf("b: %q", got)
	}
}

func TestCheckTable(t *testing.T) {
	r := &checkReport{Cluster: "c1", Resources: []checkResult{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "ok", Result: checkAllowed, Warnings: []string{"audit: team label missing"}},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "bad-one", Result: checkDenied, Message: "denied:\n\n  rule: no \n"},
		{APIVersion: "v1", Kind: "Namespace", Name: "shop", Result: checkAllowed},
	}, Summary: checkSummary{Allowed: 2, Denied: 1, Warnings: 1}}
	var out bytes.Buffer
	checkWriteTable(&out, r)
	want := `RESULT   KIND        NAMESPACE  NAME
allowed  Deployment  shop       ok
    warning: audit: team label missing
denied   Deployment  shop       bad-one
    denied:
      rule: no
allowed  Namespace              shop

3 resources checked in cluster c1 with a server-side dry-run (nothing was created): 2 allowed, 1 denied, 0 could not be checked, 1 with warnings.
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestCheckUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--cluster", "c1"}, "-f is required"},
		{[]string{"check", "-f", "x.yaml"}, "--cluster is required"},
		{[]string{"check", "-f", "-", "--cluster", "c1"}, "no objects in -"},
	} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), tc.args, Streams{In: strings.NewReader("\n---\n"), Out: &out, ErrOut: &errOut})
		if code != ExitError || !strings.Contains(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line with %q", tc.args, code, errOut.String(), out.String(), tc.want)
		}
	}
}
