package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/internal/archivetest"
	"github.com/policyhub/policyhub/internal/registrytest"
)

// pushRawBundle pushes a Kyverno policy bundle (format 1) whose one content layer is content, as
// given, and whose config indexes nothing.
func pushRawBundle(t *testing.T, ref, user, password string, content []byte) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuthFromKeychain(registrytest.Keychain(user, password))
	descriptor := func(data []byte, mt types.MediaType) v1.Descriptor {
		l := static.NewLayer(data, mt)
		if err := remote.WriteLayer(r.Context(), l, auth); err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return v1.Descriptor{MediaType: mt, Size: int64(len(data)), Digest: d}
	}
	config, err := json.Marshal(map[string]any{"formatVersion": "1.0.0", "name": "bomb", "resources": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: descriptor(config, source.KyvernoBundleConfigMediaType),
		Layers: []v1.Descriptor{descriptor(content, source.KyvernoBundleContentMediaType)}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(r, rawOCIManifest(data), auth); err != nil {
		t.Fatal(err)
	}
}

type rawOCIManifest []byte

func (m rawOCIManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawOCIManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// cpuTime is the CPU this process (the test and its in-process hub) has used so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A policy bundle whose content layer is a gzip bomb — 16 GiB of zeros in the 16 MiB a layer may
// be, in a file the reader would skip — is refused within seconds, naming the bound, without
// burning a core (inflating all of it takes several CPU seconds); nothing is dispatched.
func TestPolicySetBombLayerIsRefusedAtTheBound(t *testing.T) {
	startHub(t, time.Hour)
	const user, password, setName = "platform", "s3cret", "e2e-pset-bomb"
	reg := registrytest.Start(t, user, password)
	ref := reg.Host + "/bundles/bomb:1.0.0"
	// The most MiB of zeros whose gzip fits the 16 MiB a layer may be: about 16 GiB.
	bomb := archivetest.ZerosBomb(t, "pss/zeros.bin", int(source.DefaultLimits.MaxTotalBytes-4096)/len(archivetest.ZerosMember(t)))
	pushRawBundle(t, ref, user, password, bomb)
	registrySecret(t, "bomb-registry", reg.Host, user, password)

	cpu, start := cpuTime(t), time.Now()
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    oci: {ref: %q, secretRef: {name: bomb-registry}}
  placement: {clusters: [cluster-1]}
`, setName, ref))
	hub := directClient(t, fleetOf(t).Hub.Config)
	var refused *metav1.Condition
	eventually(t, 20*time.Second, 100*time.Millisecond, "the bomb refused", func() error {
		ps := &policyhubv1.PolicySet{}
		if err := hub.Get(testContext(t), client.ObjectKey{Name: setName}, ps); err != nil {
			return err
		}
		refused = meta.FindStatusCondition(ps.Status.Conditions, "SourceReady")
		if refused == nil || refused.Status != metav1.ConditionFalse {
			return fmt.Errorf("SourceReady %+v", refused)
		}
		return nil
	})
	took, used := time.Since(start), cpuTime(t)-cpu
	t.Logf("refused after %s, %s of CPU, a layer of %d bytes: %s", took, used, len(bomb), refused.Message)
	if want := "inflates to more than 67108864 bytes"; !strings.Contains(refused.Message, want) {
		t.Errorf("SourceReady says %q, want it to name the bound (%q)", refused.Message, want)
	}
	if used > 3*time.Second {
		t.Errorf("the hub used %s of CPU refusing the bomb: it inflated far past the bound", used)
	}
	ps := &policyhubv1.PolicySet{}
	if err := hub.Get(testContext(t), client.ObjectKey{Name: setName}, ps); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(ps.Status.Conditions, policyhubv1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "SourceNotReady" {
		t.Errorf("Ready %+v, want False: nothing dispatched", ready)
	}
	if ps.Status.Source != nil && ps.Status.Source.Snapshot != "" {
		t.Errorf("a version was kept: %+v", ps.Status.Source)
	}
}

// A ConfigMap already in the hub's namespace under the name of a version's snapshot, which the set
// does not control, is never adopted nor overwritten: the version is not kept (SourceReady False
// saying why), nothing is dispatched; once it is gone the hub writes its own and the version runs.
func TestPolicySetSnapshotIsNeverAdopted(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const setName = "e2e-pset-squatted"
	manifest := fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    inline:
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: pset-squatted}
      spec: %s
  placement: {clusters: [cluster-1]}
`, setName, indentedSpec("pset-squatted"))
	want := &policyhubv1.PolicySet{}
	if err := yaml.Unmarshal([]byte(manifest), want); err != nil {
		t.Fatal(err)
	}
	version, err := source.Inline(want.Spec.Source.Inline, source.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	squatter := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eHubNamespace, Name: source.SnapshotName(setName, version.Digest)},
		Data:       map[string]string{"note": "not the set's"},
	}
	if err := hub.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, squatter) })

	createPolicySet(t, manifest)
	waitPolicySet(t, setName, "the version not kept", sourceRefused("", nil, "a ConfigMap of that name is there", "does not control it", "not adopted, not overwritten"))
	there := &corev1.ConfigMap{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(squatter), there); err != nil {
		t.Fatal(err)
	}
	if there.ResourceVersion != squatter.ResourceVersion || len(there.OwnerReferences) > 0 || len(there.BinaryData) > 0 {
		t.Errorf("the ConfigMap was written: owners %v, binaryData %d keys, resourceVersion %s (was %s)", there.OwnerReferences, len(there.BinaryData), there.ResourceVersion, squatter.ResourceVersion)
	}
	if clusterPolicy(t, "cluster-1", "pset-squatted") != nil {
		t.Error("the member reached cluster-1 from a version not kept")
	}

	if err := hub.Delete(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	set := waitPolicySet(t, setName, "the version kept once the ConfigMap is gone", setInForce(version.Digest, "cluster-1"))
	snapshot := &corev1.ConfigMap{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: e2eHubNamespace, Name: set.Status.Source.Snapshot}, snapshot); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(snapshot, set.PolicySet) || set.Status.Source.MembersDigest != version.Digest {
		t.Errorf("snapshot owners %v, membersDigest %q: want the set's, pinning %s", snapshot.OwnerReferences, set.Status.Source.MembersDigest, version.Digest)
	}
}
