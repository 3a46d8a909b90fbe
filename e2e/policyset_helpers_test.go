package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/registrytest"
)

// kyvernoPush pushes the policies (file name → YAML) to ref with the real Kyverno CLI, as a
// platform team publishes its library, with the registry credentials user and password; it
// returns the digest the registry holds for ref.
func kyvernoPush(t *testing.T, ref, user, password string, files map[string]string) string {
	t.Helper()
	cli, err := fleet.KyvernoCLI()
	if err != nil {
		t.Fatal(err)
	}
	library := t.TempDir()
	for file, content := range files {
		if err := os.WriteFile(filepath.Join(library, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	dockerConfig := t.TempDir()
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), dockerConfigJSON(parsed.Context().RegistryStr(), user, password), 0o600); err != nil {
		t.Fatal(err)
	}
	push := exec.CommandContext(testContext(t), cli, "oci", "push", "-i", ref, library)
	push.Env = append(os.Environ(), "KYVERNO_EXPERIMENTAL=true", "DOCKER_CONFIG="+dockerConfig)
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("kyverno oci push: %v\n%s", err, out)
	}
	head, err := remote.Head(parsed, remote.WithAuthFromKeychain(registrytest.Keychain(user, password)))
	if err != nil {
		t.Fatal(err)
	}
	return head.Digest.String()
}

// dockerConfigJSON is a docker config.json holding credentials for host.
func dockerConfigJSON(host, user, password string) []byte {
	auths, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	if err != nil {
		panic(err)
	}
	return auths
}

// registrySecret creates a docker-registry Secret in the hub's namespace with credentials for
// host, until the test ends.
func registrySecret(t *testing.T, secretName, host, user, password string) {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eHubNamespace, Name: secretName},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON(host, user, password)},
	}
	if err := hub.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), secret) })
}

// createPolicySet creates a PolicySet from YAML and, when the test ends, deletes it and waits
// until the hub has pruned it and let it go.
func createPolicySet(t *testing.T, manifest string) *policyhubv1.PolicySet {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	ps := &policyhubv1.PolicySet{}
	if err := yaml.Unmarshal([]byte(manifest), ps); err != nil {
		t.Fatal(err)
	}
	inScope(t, ps)
	if err := hub.Create(ctx, ps); err != nil {
		t.Fatalf("create PolicySet %s: %v", ps.Name, err)
	}
	t.Cleanup(func() { deletePolicySet(t, ps.Name) })
	return ps
}

// deletePolicySet deletes the PolicySet and waits until the hub has pruned it and let it go.
func deletePolicySet(t *testing.T, name string) {
	t.Helper()
	deleteDeclaration(t, &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// setView is a PolicySet with its state in each cluster, read from its ClusterStatusSlices.
type setView struct {
	*policyhubv1.PolicySet
	Clusters []policyhubv1.ClusterStatus
}

func (setView) DeepCopyObject() notAnObject { return notAnObject{} }

// waitPolicySet polls the PolicySet until check accepts it, and returns it.
func waitPolicySet(t *testing.T, name, what string, check func(*setView) error) *setView {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var view *setView
	// Three minutes: a rollout's waves each wait for their agents' fresh reports.
	eventually(t, 3*time.Minute, 200*time.Millisecond, what, func() error {
		ps := &policyhubv1.PolicySet{}
		if err := hub.Get(testContext(t), client.ObjectKey{Name: name}, ps); err != nil {
			return err
		}
		clusters, err := clusterStates(testContext(t), hub, e2eHubNamespace, policyhubv1.KindPolicySet, ps)
		if err != nil {
			return err
		}
		view = &setView{PolicySet: ps, Clusters: clusters}
		if ps.Status.ObservedGeneration != ps.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d (conditions %+v)", ps.Status.ObservedGeneration, ps.Generation, ps.Status.Conditions)
		}
		return check(view)
	})
	return view
}

// setInForce is a waitPolicySet check: the set is Ready, at revision digest, and every one of
// clusters is Synced with its members in force, at that revision.
func setInForce(digest string, clusters ...string) func(*setView) error {
	return func(s *setView) error {
		if c := meta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("not Ready: %+v", c)
		}
		return setKept(digest, clusters...)(s)
	}
}

// setKeptWhileSourceDown is a waitPolicySet check: the set's source cannot be read, so the set is
// not Ready (SourceNotReady, naming the version kept), while every one of clusters keeps version
// digest in force.
func setKeptWhileSourceDown(digest string, clusters ...string) func(*setView) error {
	return func(s *setView) error {
		c := meta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyhubv1.ReasonSourceNotReady || !strings.Contains(c.Message, "the clusters keep version "+digest) {
			return fmt.Errorf("Ready %+v, want False, SourceNotReady, naming version %s", c, digest)
		}
		return setKept(digest, clusters...)(s)
	}
}

// setKept is a waitPolicySet check: the set is at revision digest, and every one of clusters is
// Synced with its members in force, at that revision.
func setKept(digest string, clusters ...string) func(*setView) error {
	return func(s *setView) error {
		if s.Status.Source == nil || s.Status.Source.Digest != digest {
			return fmt.Errorf("status.source %+v, want digest %s", s.Status.Source, digest)
		}
		if len(s.Clusters) != len(clusters) {
			return fmt.Errorf("%d clusters in status, want %v", len(s.Clusters), clusters)
		}
		for i, c := range s.Clusters {
			if c.Name != clusters[i] || c.Phase != policyhubv1.ClusterPhaseSynced || c.InForce == nil || !*c.InForce || c.Revision != digest {
				return fmt.Errorf("cluster %s: phase %s, inForce %v, revision %q (want %s Synced in force at %s)", c.Name, c.Phase, c.InForce, c.Revision, clusters[i], digest)
			}
		}
		return nil
	}
}

// clusterPolicy reads a ClusterPolicy from a cluster directly (nil when it does not exist).
func clusterPolicy(t *testing.T, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("kyverno.io/v1")
	obj.SetKind("ClusterPolicy")
	err := directClient(t, fleetOf(t).Cluster(cluster).Config).Get(testContext(t), client.ObjectKey{Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// snapshotsOf lists the PolicySet's snapshots on the hub.
func snapshotsOf(t *testing.T, ps *policyhubv1.PolicySet) []string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := directClient(t, fleetOf(t).Hub.Config).List(testContext(t), list, client.InNamespace(e2eHubNamespace),
		client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(ps.UID)}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return names
}

// updatePolicySet reads the PolicySet, applies change and writes it back.
func updatePolicySet(t *testing.T, name string, change func(*policyhubv1.PolicySet)) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	// The hub writes the status meanwhile (a new resourceVersion): read again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &policyhubv1.PolicySet{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		change(live)
		return hub.Update(context.Background(), live)
	})
	if err != nil {
		t.Fatalf("update PolicySet %s: %v", name, err)
	}
}

// createLibrary creates a policy library ConfigMap in the hub's namespace, labelled library=label
// for a PolicySet's spec.source.configMaps selector, until the test ends.
func createLibrary(t *testing.T, name, label string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	library := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eHubNamespace, Name: name, Labels: map[string]string{policyhubv1.LabelPolicyLibrary: "true", "library": label}},
		Data:       data,
	}
	if err := hub.Create(testContext(t), library); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), library) })
	return library
}

// printedColumns reads a cluster-scoped policyhub.io object as the hub's apiserver prints it (the
// Table kubectl get and kubectl get -o wide show: the CRD's printer columns, wide ones included),
// by column name.
func printedColumns(t *testing.T, resource, name string) map[string]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/apis", policyhubv1.GroupVersion.Group, policyhubv1.GroupVersion.Version, resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(testContext(t))
	if err != nil {
		t.Fatalf("get %s/%s as a Table: %v", resource, name, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		t.Fatalf("decode the Table of %s/%s: %v", resource, name, err)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		t.Fatalf("Table of %s/%s: %d rows, want 1 with a cell per column: %s", resource, name, len(table.Rows), body)
	}
	out := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		out[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}
