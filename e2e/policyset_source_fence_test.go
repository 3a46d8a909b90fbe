package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/internal/archivetest"
	"github.com/policyhub/policyhub/internal/gittest"
)

// fenceListener is a server the hub must never reach: it serves a valid artifact (a policy the
// hub would ship if it fetched it) and counts the requests it is sent.
func fenceListener(t *testing.T, artifact []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(artifact)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// fluxSource is a Flux GitRepository on the hub, created until the test ends.
func fluxSource(t *testing.T, namespace, name, url string, suspend bool) *unstructured.Unstructured {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	src := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policyhubv1.FluxSourceGroupVersion.String(), "kind": "GitRepository",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"url": url, "interval": "2s", "ref": map[string]any{"branch": "main"}, "suspend": suspend},
	}}
	if err := hub.Create(testContext(t), src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), src) })
	return src
}

// pointArtifactAt writes a Flux source's status.artifact (as whoever may write its status could)
// so that it names url, holding data, unless it does already.
func pointArtifactAt(t *testing.T, namespace, name, url string, data []byte) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	src := &unstructured.Unstructured{}
	src.SetAPIVersion(policyhubv1.FluxSourceGroupVersion.String())
	src.SetKind("GitRepository")
	if err := hub.Get(testContext(t), client.ObjectKey{Namespace: namespace, Name: name}, src); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "url"); got == url {
		return
	}
	sum := sha256.Sum256(data)
	orig := src.DeepCopy()
	if err := unstructured.SetNestedMap(src.Object, map[string]any{
		"path": "gitrepository/x/y/evil.tar.gz", "url": url, "revision": "main@sha1:" + strings.Repeat("e", 40),
		"digest": "sha256:" + hex.EncodeToString(sum[:]), "lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
	}, "status", "artifact"); err != nil {
		t.Fatal(err)
	}
	if err := hub.Status().Patch(testContext(t), src, client.MergeFrom(orig)); err != nil {
		t.Fatalf("write status.artifact of %s/%s: %v", namespace, name, err)
	}
}

// sourceRefused is a waitPolicySet check: SourceReady False for this generation, saying every
// one of want, and the clusters still at version digest (the set not Ready meanwhile).
func sourceRefused(digest string, clusters []string, want ...string) func(*setView) error {
	return func(s *setView) error {
		c := meta.FindStatusCondition(s.Status.Conditions, controllers.ConditionSourceReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != s.Generation {
			return fmt.Errorf("SourceReady %+v", c)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("SourceReady %q does not say %q", c.Message, w)
			}
		}
		if digest == "" {
			return nil
		}
		return setKeptWhileSourceDown(digest, clusters...)(s)
	}
}

// A PolicySet's Flux source cannot be turned against the hub. Whoever may write a Flux source's
// status points its artifact URL at another server (here a listener serving a valid artifact with
// a policy of its own): the hub refuses the URL before connecting (SourceReady False naming the
// host), the listener is never sent a request, and the cluster keeps the version read before.
// `kubectl policyhub sync --dry-run` fetches nothing either: it plans the version the hub keeps.
// A set naming a source in a namespace the hub admin did not allow is refused naming the field
// and the flag, and nothing is read there. A snapshot changed behind the hub's back is refused
// when read (here by the CLI), its members hashed again against the set's status.
func TestPolicySetFluxSourcesAreFenced(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns, name = "pset-fence-e2e", "e2e-pset-fence"
	evilData := archivetest.Tarball(t, archivetest.File{Name: "policies/evil.yaml", Content: psAuditPolicy("pset-fence-evil", ns, "evil", "shipped by whoever wrote the status")})
	evil, hits := fenceListener(t, evilData)

	repo := gittest.Serve(t)
	repo.Commit(t, "policies", map[string]string{"policies/team.yaml": psAuditPolicy("pset-fence-team", ns, "team", "label team is required")})
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.FluxNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fluxSource(t, fleet.FluxNamespace, "fence-policies", repo.URL, false)
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    fluxSource: {kind: GitRepository, name: fence-policies, namespace: %s, path: policies}
  placement: {clusters: [cluster-1]}
`, name, fleet.FluxNamespace))
	var v1 string
	waitPolicySet(t, name, "the Git version in force in cluster-1", func(s *setView) error {
		if s.Status.Source == nil || s.Status.Source.Members != 1 {
			return fmt.Errorf("source %+v", s.Status.Source)
		}
		v1 = s.Status.Source.Digest
		return setInForce(v1, "cluster-1")(s)
	})

	// (a) The source is suspended (source-controller writes its status no more) and its status is
	// pointed at the listener, with the listener's artifact's true digest.
	live := &unstructured.Unstructured{}
	live.SetAPIVersion(policyhubv1.FluxSourceGroupVersion.String())
	live.SetKind("GitRepository")
	if err := hub.Get(ctx, client.ObjectKey{Namespace: fleet.FluxNamespace, Name: "fence-policies"}, live); err != nil {
		t.Fatal(err)
	}
	orig := live.DeepCopy()
	if err := unstructured.SetNestedField(live.Object, true, "spec", "suspend"); err != nil {
		t.Fatal(err)
	}
	if err := hub.Patch(ctx, live, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	evilURL := evil.URL + "/gitrepository/flux-system/fence-policies/evil.tar.gz"
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	var pointed atomic.Bool
	waitPolicySet(t, name, "the artifact URL to another host refused, cluster-1 at the Git version", func(s *setView) error {
		// A reconcile source-controller had under way may write the status back once: point it
		// again until the hub has seen the listener's URL.
		if err := sourceRefused(v1, []string{"cluster-1"}, evilHost, "is not source-controller's storage", "not fetched", "the clusters keep version "+v1)(s); err != nil {
			pointArtifactAt(t, fleet.FluxNamespace, "fence-policies", evilURL, evilData)
			pointed.Store(true)
			return err
		}
		return nil
	})
	if !pointed.Load() {
		t.Fatal("the status was never pointed at the listener")
	}
	if clusterPolicy(t, "cluster-1", "pset-fence-evil") != nil {
		t.Error("the listener's policy reached cluster-1")
	}
	if clusterPolicy(t, "cluster-1", "pset-fence-team") == nil {
		t.Error("the Git version's policy left cluster-1")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the listener was sent %d requests", n)
	}

	// The CLI plans the version the hub keeps, and fetches nothing from the admin's machine.
	code, out, errOut := syncCheckRun(t, "", "sync", "--dry-run", "--policy", "pset/"+name, "-o", "json")
	if code != 0 || !strings.Contains(out, "read by the hub only") || !strings.Contains(out, "planned the version the hub keeps, "+v1) {
		t.Errorf("sync --dry-run: exit %d, want 0 with a note that the hub's version is planned\n%s\n%s", code, out, errOut)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("sync --dry-run sent the listener %d requests", n)
	}

	// (b) A source in a namespace the hub admin did not allow, its artifact at the listener too.
	const teamNS = "team-fence-e2e"
	createNamespace(ctx, t, hub, teamNS)
	fluxSource(t, teamNS, "team-policies", repo.URL, true)
	pointArtifactAt(t, teamNS, "team-policies", evilURL, evilData)
	updatePolicySet(t, name, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Source.FluxSource.Namespace, ps.Spec.Source.FluxSource.Name = teamNS, "team-policies"
	})
	waitPolicySet(t, name, "a source in another namespace refused, cluster-1 at the Git version",
		sourceRefused(v1, []string{"cluster-1"}, `spec.source.fluxSource.namespace "team-fence-e2e"`, "--flux-source-namespaces", `"flux-system"`, "not read"))
	if n := hits.Load(); n != 0 {
		t.Fatalf("the listener was sent %d requests", n)
	}

	// A snapshot replaced behind the hub's back (valid policies, the set's controller reference,
	// another message) is refused when read: its members no longer hash to what the status pins.
	ps := &policyhubv1.PolicySet{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Status.Source.MembersDigest != v1 {
		t.Errorf("status.source.membersDigest %q, want the sealed digest %s", ps.Status.Source.MembersDigest, v1)
	}
	replaceSnapshot(t, ps.Status.Source.Snapshot, "label team is required", "label team is optional")
	code, out, errOut = syncCheckRun(t, "", "sync", "--dry-run", "--policy", "pset/"+name, "-o", "json")
	if code != 2 || !strings.Contains(errOut, "its members hash to") || !strings.Contains(errOut, "the set's status pins "+v1) {
		t.Errorf("sync --dry-run over a changed snapshot: exit %d, want 2 refusing it\n%s\n%s", code, out, errOut)
	}
}

// replaceSnapshot deletes a snapshot and creates it again, everything kept but its members, in
// which from is replaced by to.
func replaceSnapshot(t *testing.T, name, from, to string) {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	cm := &corev1.ConfigMap{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: e2eHubNamespace, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[policyhubv1.SnapshotKey]))
	if err != nil {
		t.Fatal(err)
	}
	var members bytes.Buffer
	if _, err := members.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	changed := strings.ReplaceAll(members.String(), from, to)
	if changed == members.String() || !json.Valid([]byte(changed)) {
		t.Fatalf("the snapshot's members do not say %q", from)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(changed)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := hub.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	forged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name, Labels: cm.Labels, Annotations: cm.Annotations, OwnerReferences: cm.OwnerReferences},
		Immutable:  cm.Immutable, BinaryData: map[string][]byte{policyhubv1.SnapshotKey: buf.Bytes()},
	}
	if err := hub.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
}
