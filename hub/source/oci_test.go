package source

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/policyhub/policyhub/internal/registrytest"
)

// These tests pull from go-containerregistry's registry (a real OCI distribution server, in
// process, behind basic auth), artifacts laid out as `kyverno oci push` lays them out: an OCI
// manifest with Kyverno's config media type and one YAML layer per policy, annotated with its
// kind and name, the policy marshalled from its typed form (so with a status and a null
// creationTimestamp).

const testUser, testPassword = "platform", "s3cret"

// testRegistry serves a registry that takes only testUser's requests; it returns its host.
func testRegistry(t *testing.T) string {
	t.Helper()
	return registrytest.Serve(t, testUser, testPassword)
}

var testKeychain = registrytest.Keychain(testUser, testPassword)

// layer is one policy layer as kyverno oci push writes it.
type layer struct {
	kind, name, yaml string
	mediaType        types.MediaType // default: the policy layer's
}

func clusterPolicy(name string) layer {
	return layer{kind: "ClusterPolicy", name: name, yaml: fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  annotations:
    policies.kyverno.io/severity: medium
  creationTimestamp: null
  name: %s
  uid: 1234
spec:
  rules:
  - match:
      any:
      - resources:
          kinds: [Pod]
    name: check
    validate:
      failureAction: Audit
      message: labelled
      pattern:
        metadata:
          labels:
            app: "?*"
status:
  autogen: {}
  ready: false
  rulecount:
    validate: 1
`, name)}
}

// push writes an artifact of layers to host/repo:tag, with configType as its config's media
// type, and returns its digest.
func push(t *testing.T, host, repoTag string, configType types.MediaType, layers ...layer) string {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), configType)
	for _, l := range layers {
		mt := l.mediaType
		if mt == "" {
			mt = KyvernoPolicyLayerMediaType
		}
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer([]byte(l.yaml), mt), Annotations: map[string]string{
			"io.kyverno.image.kind": l.kind, "io.kyverno.image.name": l.name, "io.kyverno.image.apiVersion": "kyverno.io/v1",
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ref, err := name.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(testKeychain)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// A library pulled by tag is pinned to its digest, and the same by digest; each policy is what a
// policy is (no status, no creationTimestamp, no uid), sorted; a moved tag names a new digest.
func TestPullOCIPinsAndStrips(t *testing.T) {
	host := testRegistry(t)
	ctx := context.Background()
	digest := push(t, host, "policies/baseline:v1", KyvernoConfigMediaType, clusterPolicy("require-labels"), clusterPolicy("disallow-latest"),
		layer{kind: "Policy", name: "limits", yaml: "apiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: limits, namespace: shop}\nspec: {rules: []}\n"},
		layer{yaml: "not a policy: a README", mediaType: "text/markdown"})

	art, err := PullOCI(ctx, host+"/policies/baseline:v1", testKeychain, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if art.Digest != digest {
		t.Errorf("digest %s, want the manifest's %s", art.Digest, digest)
	}
	var got []string
	for _, p := range art.Policies {
		got = append(got, identity(p))
		for _, field := range []string{"status"} {
			if _, ok := p.Object[field]; ok {
				t.Errorf("%s kept %s", identity(p), field)
			}
		}
		meta := p.Object["metadata"].(map[string]any)
		for field := range meta {
			if field != "name" && field != "namespace" && field != "labels" && field != "annotations" {
				t.Errorf("%s kept metadata.%s", identity(p), field)
			}
		}
	}
	if want := "[ClusterPolicy disallow-latest ClusterPolicy require-labels Policy shop/limits]"; fmt.Sprint(got) != want {
		t.Errorf("policies %v, want %s (the markdown layer skipped)", got, want)
	}
	if sev := art.Policies[0].GetAnnotations()["policies.kyverno.io/severity"]; sev != "medium" {
		t.Errorf("annotations lost: %v", art.Policies[0].GetAnnotations())
	}

	byDigest, err := PullOCI(ctx, host+"/policies/baseline@"+digest, testKeychain, DefaultLimits)
	if err != nil || byDigest.Digest != digest || len(byDigest.Policies) != 3 {
		t.Errorf("by digest: %v, %+v", err, byDigest)
	}

	moved := push(t, host, "policies/baseline:v1", KyvernoConfigMediaType, clusterPolicy("require-labels"))
	again, err := PullOCI(ctx, host+"/policies/baseline:v1", testKeychain, DefaultLimits)
	if err != nil || again.Digest != moved || moved == digest || len(again.Policies) != 1 {
		t.Errorf("after the tag moved: %v, digest %s (was %s), %d policies", err, again.Digest, digest, len(again.Policies))
	}
}

// What is not a policy library within limits is refused with an error naming why, and nothing
// is returned.
func TestPullOCIRefuses(t *testing.T) {
	host := testRegistry(t)
	ctx := context.Background()
	big := clusterPolicy("big")
	big.yaml += "# " + strings.Repeat("x", 2048) + "\n"
	for _, tc := range []struct {
		name     string
		config   types.MediaType
		layers   []layer
		keychain authn.Keychain
		limits   Limits
		want     string
	}{
		{name: "wrong credentials", config: KyvernoConfigMediaType, layers: []layer{clusterPolicy("a")},
			keychain: registrytest.Keychain(testUser, "wrong"), want: "401"},
		{name: "a container image, not a policy artifact", config: types.OCIConfigJSON, layers: []layer{clusterPolicy("a")},
			want: `config media type "application/vnd.oci.image.config.v1+json"`},
		{name: "a layer that is not a Kyverno policy", config: KyvernoConfigMediaType,
			layers: []layer{{kind: "ConfigMap", name: "x", yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}},
			want:   `kind "ConfigMap" of apiVersion "v1": not a Kyverno policy`},
		{name: "a policy twice", config: KyvernoConfigMediaType, layers: []layer{clusterPolicy("a"), clusterPolicy("a")},
			want: "ClusterPolicy a is in layers"},
		{name: "a Policy without a namespace", config: KyvernoConfigMediaType,
			layers: []layer{{kind: "Policy", name: "p", yaml: "apiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: p}\nspec: {}\n"}},
			want:   "metadata.namespace is required"},
		{name: "an invalid name", config: KyvernoConfigMediaType,
			layers: []layer{{kind: "ClusterPolicy", name: "P", yaml: "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: Not_A_Name}\nspec: {}\n"}},
			want:   `metadata.name "Not_A_Name"`},
		{name: "a name Kyverno refuses for its length", config: KyvernoConfigMediaType,
			layers: []layer{{kind: "ClusterPolicy", name: "long", yaml: "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: " + strings.Repeat("a", 64) + "}\nspec: {}\n"}},
			want:   "longer than 63 characters"},
		{name: "more policies than the limit", config: KyvernoConfigMediaType, layers: []layer{clusterPolicy("a"), clusterPolicy("b"), clusterPolicy("c")},
			limits: Limits{MaxPolicies: 2, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20}, want: "more than 2 policies"},
		{name: "a policy over its size", config: KyvernoConfigMediaType, layers: []layer{clusterPolicy("a"), big},
			limits: Limits{MaxPolicies: 10, MaxPolicyBytes: 2048, MaxTotalBytes: 1 << 20}, want: "over the 2048 a policy may have"},
		{name: "policies over the total", config: KyvernoConfigMediaType, layers: []layer{clusterPolicy("a"), clusterPolicy("b"), clusterPolicy("c")},
			limits: Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1000}, want: "over 1000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := "refused/" + strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ",", "")) + ":v1"
			push(t, host, repo, tc.config, tc.layers...)
			kc, limits := tc.keychain, tc.limits
			if kc == nil {
				kc = testKeychain
			}
			if limits == (Limits{}) {
				limits = DefaultLimits
			}
			art, err := PullOCI(ctx, host+"/"+repo, kc, limits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if art != nil {
				t.Errorf("returned %+v with the error", art)
			}
		})
	}
}

// An image index is not one artifact.
func TestPullOCIRefusesAnIndex(t *testing.T) {
	host := testRegistry(t)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), KyvernoConfigMediaType)
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1}})
	ref, err := name.ParseReference(host + "/index/set:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, index, remote.WithAuthFromKeychain(testKeychain)); err != nil {
		t.Fatal(err)
	}
	if _, err := PullOCI(context.Background(), ref.String(), testKeychain, DefaultLimits); err == nil || !strings.Contains(err.Error(), "image index") {
		t.Errorf("error %v, want one saying it is an image index", err)
	}
}
