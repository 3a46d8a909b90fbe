package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
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

// encodeAs writes obj in the media type, as client-go or kubectl would send it.
func encodeAs(t *testing.T, obj runtime.Object, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(leaseCodecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	var out bytes.Buffer
	if err := info.Serializer.Encode(obj, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func decodeLease(t *testing.T, body []byte, mediaType string) *coordinationv1.Lease {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(leaseCodecs.SupportedMediaTypes(), mediaType)
	obj, _, err := info.Serializer.Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", mediaType, err)
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		t.Fatalf("decoded a %T, want a Lease", obj)
	}
	return lease
}

func TestRenameLease(t *testing.T) {
	const from, to = "policyhub-sync", "policyhub-sync-rc-0007"
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "policyhub-system", ResourceVersion: "42"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("bench-rep/replica-0"), LeaseDurationSeconds: ptr.To[int32](15)},
		}
	}
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonConflict,
		Message: `Operation cannot be fulfilled on leases.coordination.k8s.io "policyhub-sync"`, Details: &metav1.StatusDetails{Name: from}}
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		for _, tc := range []struct {
			name        string
			body        []byte
			contentType string // default: mediaType
			renamed     bool
			wantName    string // the Lease's name after, when the body is one
			wantErr     bool
		}{
			{name: "the sync Lease", body: encodeAs(t, lease(from), mediaType), renamed: true, wantName: to},
			{name: "with a charset", body: encodeAs(t, lease(from), mediaType), contentType: mediaType + "; charset=utf-8", renamed: true, wantName: to},
			{name: "another Lease", body: encodeAs(t, lease("other"), mediaType), wantName: "other"},
			{name: "already renamed", body: encodeAs(t, lease(to), mediaType), wantName: to},
			{name: "a name prefixed like it", body: encodeAs(t, lease(from+"2"), mediaType), wantName: from + "2"},
			{name: "a Status naming it (an error answer)", body: encodeAs(t, status, mediaType)},
			{name: "empty", body: nil},
			{name: "a merge patch", body: []byte(`{"metadata":{"name":"policyhub-sync"}}`), contentType: "application/merge-patch+json"},
			{name: "no media type", body: []byte(`{"metadata":{"name":"policyhub-sync"}}`), contentType: "-"},
			{name: "broken", body: encodeAs(t, lease(from), mediaType)[:20], wantErr: true},
		} {
			t.Run(mediaType+"/"+tc.name, func(t *testing.T) {
				ct := tc.contentType
				switch ct {
				case "":
					ct = mediaType
				case "-":
					ct = ""
				}
				out, renamed, err := renameLease(tc.body, ct, from, to)
				if (err != nil) != tc.wantErr {
					t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
				}
				if err != nil {
					return
				}
				if renamed != tc.renamed {
					t.Errorf("renamed = %v, want %v", renamed, tc.renamed)
				}
				if !renamed && !bytes.Equal(out, tc.body) {
					t.Errorf("a body not renamed changed: %q, was %q", out, tc.body)
				}
				if tc.wantName == "" {
					return
				}
				got := decodeLease(t, out, mediaType)
				if got.Name != tc.wantName {
					t.Errorf("name = %q, want %q", got.Name, tc.wantName)
				}
				// Everything else stays: the resourceVersion makes the hub's update conditional.
				want := lease(tc.wantName)
				if got.Namespace != want.Namespace || got.ResourceVersion != want.ResourceVersion || *got.Spec.HolderIdentity != *want.Spec.HolderIdentity || *got.Spec.LeaseDurationSeconds != 15 {
					t.Errorf("the rest of the Lease changed: %+v", got)
				}
			})
		}
		// Renamed there and back, the Lease is the one the hub sent, byte for byte.
		t.Run(mediaType+"/there and back", func(t *testing.T) {
			sent := encodeAs(t, lease(from), mediaType)
			there, _, err := renameLease(sent, mediaType, from, to)
			if err != nil {
				t.Fatal(err)
			}
			back, renamed, err := renameLease(there, mediaType, to, from)
			if err != nil || !renamed {
				t.Fatalf("renaming back: renamed %v, %v", renamed, err)
			}
			if !bytes.Equal(back, sent) {
				t.Errorf("there and back: %q, want %q", back, sent)
			}
		})
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
