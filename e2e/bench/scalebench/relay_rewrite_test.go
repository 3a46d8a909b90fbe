package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestRouteLeaseRequest(t *testing.T) {
	const own = "policyhub-sync-rc-0007"
	for _, tc := range []struct {
		name, method, path string
		want               leaseRoute
	}{
		{"the sync Lease read", http.MethodGet, syncLeasePath, leaseRoute{path: syncLeasesPath + "/" + own, renameBody: true}},
		{"the sync Lease updated", http.MethodPut, syncLeasePath, leaseRoute{path: syncLeasesPath + "/" + own, renameBody: true}},
		{"the sync Lease created", http.MethodPost, syncLeasesPath, leaseRoute{path: syncLeasesPath, renameBody: true}},
		{"the Leases listed: every name's", http.MethodGet, syncLeasesPath, leaseRoute{path: syncLeasesPath}},
		{"another Lease of the namespace", http.MethodGet, syncLeasesPath + "/other", leaseRoute{path: syncLeasesPath + "/other"}},
		{"a Lease named like it elsewhere", http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/default/leases/policyhub-sync", leaseRoute{path: "/apis/coordination.k8s.io/v1/namespaces/default/leases/policyhub-sync"}},
		{"a longer path under it", http.MethodGet, syncLeasePath + "/status", leaseRoute{path: syncLeasePath + "/status"}},
		{"another version", http.MethodGet, "/apis/coordination.k8s.io/v1beta1/namespaces/policyhub-system/leases/policyhub-sync", leaseRoute{path: "/apis/coordination.k8s.io/v1beta1/namespaces/policyhub-system/leases/policyhub-sync"}},
		{"a policy the hub writes", http.MethodPatch, "/apis/kyverno.io/v1/clusterpolicies/p", leaseRoute{path: "/apis/kyverno.io/v1/clusterpolicies/p"}},
		{"the namespace created", http.MethodPost, "/api/v1/namespaces", leaseRoute{path: "/api/v1/namespaces"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeLeaseRequest(tc.method, tc.path, own); got != tc.want {
				t.Errorf("routeLeaseRequest(%s, %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
			}
		})
	}
}

func TestRenameObject(t *testing.T) {
	const from, to = "policyhub-sync", "policyhub-sync-rc-0007"
	lease := `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"policyhub-sync","namespace":"policyhub-system","resourceVersion":"42"},"spec":{"holderIdentity":"bench-rep/replica-0","leaseDurationSeconds":15}}`
	for _, tc := range []struct {
		name, body string
		renamed    bool
		wantName   string // metadata.name after, when the body is an object with one
		wantErr    bool
	}{
		{name: "the sync Lease", body: lease, renamed: true, wantName: to},
		{name: "with spacing and a newline", body: " \n" + lease + "\n", renamed: true, wantName: to},
		{name: "another Lease", body: strings.Replace(lease, `"name":"policyhub-sync"`, `"name":"other"`, 1), wantName: "other"},
		{name: "already renamed", body: strings.Replace(lease, `"name":"policyhub-sync"`, `"name":"`+to+`"`, 1), wantName: to},
		{name: "a name prefixed like it", body: strings.Replace(lease, `"name":"policyhub-sync"`, `"name":"policyhub-sync2"`, 1), wantName: "policyhub-sync2"},
		{name: "no metadata (a merge patch of the spec)", body: `{"spec":{"holderIdentity":""}}`},
		{name: "no name (generateName)", body: `{"metadata":{"generateName":"policyhub-sync"}}`},
		{name: "a name that is not a string", body: `{"metadata":{"name":7}}`},
		{name: "metadata that is not an object", body: `{"metadata":"policyhub-sync"}`},
		{name: "a JSON patch", body: `[{"op":"replace","path":"/metadata/name","value":"x"}]`},
		{name: "empty", body: ""},
		{name: "a protobuf body", body: "k8s\x00\n\x10"},
		{name: "broken JSON", body: `{"metadata":{"name":"policyhub-sync"`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, renamed, err := renameObject([]byte(tc.body), from, to)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if renamed != tc.renamed {
				t.Errorf("renamed = %v, want %v", renamed, tc.renamed)
			}
			if !renamed && string(out) != tc.body {
				t.Errorf("a body not renamed changed: %q, was %q", out, tc.body)
			}
			if tc.wantName == "" {
				return
			}
			var obj struct {
				Metadata struct {
					Name, Namespace, ResourceVersion string
				}
				Spec map[string]any
			}
			if err := json.Unmarshal(out, &obj); err != nil {
				t.Fatalf("the renamed body is no JSON: %v: %s", err, out)
			}
			if obj.Metadata.Name != tc.wantName {
				t.Errorf("metadata.name = %q, want %q", obj.Metadata.Name, tc.wantName)
			}
			// Everything else stays: the resourceVersion makes the hub's update conditional.
			if obj.Metadata.Namespace != "policyhub-system" || obj.Metadata.ResourceVersion != "42" || obj.Spec["holderIdentity"] != "bench-rep/replica-0" {
				t.Errorf("the rest of the Lease changed: %s", out)
			}
		})
	}
	// Renaming back gives the Lease the hub sent.
	there, _, err := renameObject([]byte(lease), from, to)
	if err != nil {
		t.Fatal(err)
	}
	back, renamed, err := renameObject(there, to, from)
	if err != nil || !renamed {
		t.Fatalf("renaming back: renamed %v, %v", renamed, err)
	}
	var a, b any
	if json.Unmarshal(back, &a) != nil || json.Unmarshal([]byte(lease), &b) != nil || !jsonEqual(a, b) {
		t.Errorf("renamed there and back: %s, want %s", back, lease)
	}
}

func TestOwnSyncLease(t *testing.T) {
	if got, err := ownSyncLease("rc-0007"); err != nil || got != "policyhub-sync-rc-0007" {
		t.Errorf(`ownSyncLease("rc-0007") = %q, %v`, got, err)
	}
	for _, bad := range []string{"", "UPPER", strings.Repeat("a", 240), "a/b"} {
		if got, err := ownSyncLease(bad); err == nil {
			t.Errorf("ownSyncLease(%q) = %q, want an error", bad, got)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
