package source

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rawManifest is a manifest written as given, for artifacts ggcr's image builders cannot make
// (a config that is not an image config).
type rawManifest struct{ data []byte }

func (m rawManifest) RawManifest() ([]byte, error)        { return m.data, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// pushBundle writes a policy bundle as Kyverno's bundle spec lays it out: a config of configType
// indexing resources, and content layers (one, normally) of the files given; it returns the
// manifest's digest.
func pushBundle(t *testing.T, host, repoTag string, config map[string]any, contents ...[]byte) string {
	t.Helper()
	ref, err := name.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	opts := remote.WithAuthFromKeychain(testKeychain)
	cfg, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	descriptor := func(data []byte, mt types.MediaType) v1.Descriptor {
		l := static.NewLayer(data, mt)
		if err := remote.WriteLayer(ref.Context(), l, opts); err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return v1.Descriptor{MediaType: mt, Size: int64(len(data)), Digest: d}
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: descriptor(cfg, KyvernoBundleConfigMediaType)}
	for _, c := range contents {
		m.Layers = append(m.Layers, descriptor(c, KyvernoBundleContentMediaType))
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, rawManifest{data}, opts); err != nil {
		t.Fatal(err)
	}
	digest, _, err := v1.SHA256(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return digest.String()
}

const policyException = `apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata:
  name: allow-agent-host-path
  namespace: monitoring
spec:
  policyRefs:
  - name: disallow-host-path
    kind: ValidatingPolicy
  matchConditions:
  - name: agent
    expression: "object.metadata.name.startsWith('node-agent')"
`

func bundleIndex(version string, resources ...[4]string) map[string]any {
	var index []any
	for _, r := range resources {
		index = append(index, map[string]any{"apiVersion": r[0], "kind": r[1], "namespace": r[2], "name": r[3], "path": "policies.yaml", "documentIndex": 0, "digest": "sha256:unchecked", "set": "pss"})
	}
	return map[string]any{"formatVersion": version, "name": "pss", "sets": []any{map[string]any{"name": "pss", "type": "policies"}}, "resources": index}
}

// A bundle of CEL policies and their exceptions (Kyverno's bundle format 1, provisional) is read
// whole, pinned to its digest, each member stripped as any; one that is not what its index says,
// holds kyverno.io kinds, has another layout or an unknown major version is refused.
func TestPullOCIReadsAPolicyBundle(t *testing.T) {
	host := testRegistry(t)
	vp := [4]string{"policies.kyverno.io/v1", "ValidatingPolicy", "", "disallow-host-path"}
	ex := [4]string{"policies.kyverno.io/v1", "PolicyException", "monitoring", "allow-agent-host-path"}
	content := tarball(t, file{name: "pss/disallow-host-path.yaml", content: validatingPolicy}, file{name: "pss/exceptions/agent.yaml", content: policyException})
	digest := pushBundle(t, host, "bundles/pss:1.0.0", bundleIndex("1.0.0", vp, ex), content)
	art, err := PullOCI(context.Background(), host+"/bundles/pss:1.0.0", testKeychain, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range art.Policies {
		got = append(got, identity(p))
	}
	if art.Digest != digest || fmt.Sprint(got) != "[PolicyException monitoring/allow-agent-host-path ValidatingPolicy disallow-host-path]" {
		t.Errorf("digest %s (want %s), members %v", art.Digest, digest, got)
	}

	for _, tc := range []struct {
		name     string
		config   map[string]any
		contents [][]byte
		want     string
	}{
		{"an index naming a resource the content lacks", bundleIndex("1.0.0", vp, ex, [4]string{"policies.kyverno.io/v1", "ValidatingPolicy", "", "missing"}), [][]byte{content}, "is not what its config indexes"},
		{"content the index does not name", bundleIndex("1.0.0", vp), [][]byte{content}, "is not what its config indexes"},
		{"a legacy kind in a bundle", bundleIndex("1.0.0", [4]string{"kyverno.io/v1", "ClusterPolicy", "", "legacy"}),
			[][]byte{tarball(t, file{name: "legacy.yaml", content: clusterPolicy("legacy").yaml})}, "policies.kyverno.io kinds only"},
		{"an unknown major version", bundleIndex("2.0.0", vp, ex), [][]byte{content}, `formatVersion "2.0.0"`},
		{"two content layers", bundleIndex("1.0.0", vp, ex), [][]byte{content, content}, "exactly one layer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := "bundles/bad:" + strings.ReplaceAll(tc.name, " ", "-")
			pushBundle(t, host, tag, tc.config, tc.contents...)
			if _, err := PullOCI(context.Background(), host+"/"+tag, testKeychain, DefaultLimits); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
