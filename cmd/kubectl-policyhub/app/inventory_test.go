package app

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/policyhub/policyhub/hub/gateway"
)

// The CLI lists clusters from cluster-gateway's credential Secrets as metadata only: the hub's
// apiserver sends their names and labels, never the credentials in them. (RBAC cannot grant
// metadata alone: the user still needs list on Secrets in the gateway's namespace.)
func TestClusterInventoryReadsSecretsAsMetadataOnly(t *testing.T) {
	var mu sync.Mutex
	var secretLists []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
		case "/apis": // no OCM: its ManagedClusters are not served
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`))
		case "/api/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[
				{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret","verbs":["get","list","watch"]}]}`))
		case "/api/v1/namespaces/vela-system/secrets":
			mu.Lock()
			secretLists = append(secretLists, r)
			mu.Unlock()
			if !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") {
				// What a full list would send: the credentials.
				_, _ = w.Write([]byte(`{"kind":"SecretList","apiVersion":"v1","items":[{"metadata":{"name":"cluster-1"},"data":{"token":"c2VjcmV0"}}]}`))
				return
			}
			w.Header().Set("Content-Type", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
			_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[
				{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cluster-1","namespace":"vela-system",
				 "labels":{"cluster.core.oam.dev/cluster-credential-type":"ServiceAccountToken","env":"prod"}}}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	config := genericclioptions.NewConfigFlags(false)
	server := srv.URL
	config.APIServer = &server
	o := &options{config: config, secretNamespace: gateway.DefaultSecretNamespace}
	names, err := o.clusterNames(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"cluster-1"}) {
		t.Errorf("clusters %v, want [cluster-1]", names)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(secretLists) != 1 {
		t.Fatalf("%d lists of the gateway's Secrets, want 1", len(secretLists))
	}
	r := secretLists[0]
	// Metadata first: the kube-apiserver transforms any list it serves, so it never falls back to
	// the plain application/json client-go lists last (for servers that cannot).
	if accept := r.Header.Get("Accept"); !strings.Contains(strings.Split(accept, ",")[0], "as=PartialObjectMetadataList") {
		t.Errorf("the Secrets were asked for with Accept %q: want metadata first", accept)
	}
	if sel := r.URL.Query().Get("labelSelector"); sel != gateway.CredentialTypeLabel {
		t.Errorf("labelSelector %q, want only the gateway's credential Secrets (%s)", sel, gateway.CredentialTypeLabel)
	}
}
