package work

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// Kyverno 1.20 keeps its legacy kinds (policyhubv1.LegacyKinds) served but no longer executes
// them, and denies their creates and updates (deletes are allowed). A declaration that renders one
// is NotEnforced on such a cluster: unprotected, whatever the cluster holds. The hub knows it from
// the cluster's engine facts (the Kyverno version its agent reports), or from Kyverno's own
// refusal of a write of ours. Nothing of the declaration is sent there, and a refusal is not
// retried until the declaration's content or the cluster's engine facts change: a refused write
// per pass would be an error storm that grows with time x clusters.

// legacyKindsOf lists the legacy kinds among objs (group/version kind, sorted, once each).
func legacyKindsOf(objs []*unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if policyhubv1.IsLegacyKind(gvk.GroupKind()) && !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.GroupVersion().String()+" "+a.Kind, b.GroupVersion().String()+" "+b.Kind)
	})
	return out
}

// celReplacement names the policies.kyverno.io kind that takes over from a legacy object: for a
// ClusterPolicy or Policy, by what its rules do (validate unless every rule mutates, generates or
// verifies images).
func celReplacement(obj *unstructured.Unstructured) string {
	namespaced := ""
	switch obj.GetKind() {
	case "Policy", "CleanupPolicy":
		namespaced = "Namespaced"
	}
	switch obj.GetKind() {
	case "ClusterCleanupPolicy", "CleanupPolicy":
		return "policies.kyverno.io/v1 " + namespaced + "DeletingPolicy"
	case "PolicyException":
		return "policies.kyverno.io/v1 PolicyException"
	}
	kind := "ValidatingPolicy"
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	var does []string
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		switch {
		case rule["validate"] != nil:
			does = append(does, "ValidatingPolicy")
		case rule["mutate"] != nil:
			does = append(does, "MutatingPolicy")
		case rule["generate"] != nil:
			does = append(does, "GeneratingPolicy")
		case rule["verifyImages"] != nil:
			does = append(does, "ImageValidatingPolicy")
		}
	}
	if len(does) > 0 && !slices.Contains(does, "ValidatingPolicy") {
		kind = does[0]
	}
	return "policies.kyverno.io/v1 " + namespaced + kind
}

// notEnforcedMessage says why the cluster's Kyverno does not enforce the legacy objects of a
// declaration and what to do: why is the evidence (its version, or its refusal of a write).
func notEnforcedMessage(cluster, why string, objs []*unstructured.Unstructured) string {
	var kinds, rewrites []string
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if !policyhubv1.IsLegacyKind(gvk.GroupKind()) {
			continue
		}
		kind := gvk.GroupVersion().String() + " " + gvk.Kind
		rewrite := gvk.Kind + " → " + celReplacement(obj)
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
		if !slices.Contains(rewrites, rewrite) {
			rewrites = append(rewrites, rewrite)
		}
	}
	slices.Sort(kinds)
	slices.Sort(rewrites)
	sent := "nothing is sent until the declaration or the cluster's Kyverno changes"
	if _, mixed := withoutLegacy(Declaration{Objects: objs}); mixed {
		sent = "its other objects are sent and kept in step; the legacy ones are left as they are until the declaration or the cluster's Kyverno changes"
	}
	return policyhubv1.TruncateMessage(fmt.Sprintf("not enforced in cluster %s: %s; Kyverno 1.20 keeps %s served but no longer executes it and refuses its creates and updates. "+
		"Rewrite the policy as the CEL kind (%s; in an ApplicationPolicy: spec.validations instead of spec.rules); %s",
		cluster, why, strings.Join(kinds, ", "), strings.Join(rewrites, ", "), sent), 2048)
}

// withoutLegacy is d without its legacy objects, holding them (a pass neither writes nor prunes
// the legacy objects it holds live), when d also renders objects of other kinds: a PolicySet
// migrating member by member keeps its CEL members in step on a cluster whose Kyverno no longer
// executes the legacy ones. ok is false when d renders only legacy objects (or none).
func withoutLegacy(d Declaration) (rest Declaration, ok bool) {
	rest = d
	rest.Objects = make([]*unstructured.Unstructured, 0, len(d.Objects))
	for _, obj := range d.Objects {
		if !policyhubv1.IsLegacyKind(obj.GroupVersionKind().GroupKind()) {
			rest.Objects = append(rest.Objects, obj)
		}
	}
	if len(rest.Objects) == 0 || len(rest.Objects) == len(d.Objects) {
		return d, false
	}
	rest.holdLegacy = true
	return rest, true
}

// versionSaysNotEnforced is the evidence of a Kyverno version that no longer executes the legacy
// kinds ("" when the version says it does, or does not say).
func versionSaysNotEnforced(version string) string {
	enforces, known := policyhubv1.KyvernoEnforcesLegacy(version)
	if !known || enforces {
		return ""
	}
	return fmt.Sprintf("its Kyverno is %s (as its agent reports)", version)
}

// legacyRefusal returns Kyverno's refusal of a write of a legacy object (err's message), or ""
// when err is something else.
func legacyRefusal(obj *unstructured.Unstructured, err error) string {
	if err == nil || obj == nil || !policyhubv1.IsLegacyKind(obj.GroupVersionKind().GroupKind()) {
		return ""
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "" // a transport error is no answer of Kyverno's
	}
	if !policyhubv1.IsKyvernoLegacyRefusal(err.Error()) {
		return ""
	}
	return err.Error()
}

// refusalEvidence is the evidence of a refusal, Kyverno's message quoted (bounded).
func refusalEvidence(message string) string {
	return fmt.Sprintf("its Kyverno refused the hub's write (%q)", policyhubv1.TruncateMessage(message, 512))
}

// contentKey identifies what a declaration asks of a cluster: its objects' keys and content
// hashes, whether it prunes and whether it is a dry-run.
func contentKey(d Declaration) string {
	h := sha256.New()
	fmt.Fprintf(h, "%t/%t/", d.DryRun, d.Prune)
	for _, obj := range d.Objects {
		fmt.Fprintf(h, "%s=%s;", plan.KeyOf(obj), obj.GetAnnotations()[policyhubv1.AnnotationContentHash])
		if obj.GetAnnotations()[policyhubv1.AnnotationContentHash] == "" {
			// Not rendered by the hub (tests): its whole content then.
			b, _ := obj.MarshalJSON()
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// maxRefusals bounds the refusals remembered per cluster: more declarations than a cluster is
// ever handed in one pass, times many. Past it, the memory starts over: forgetting costs one
// refused write per declaration, never a wrong phase.
const maxRefusals = 4096

// refusalMemory remembers, per cluster and declaration, the content Kyverno refused and the
// engine facts it was refused under, with Kyverno's message.
type refusalMemory struct {
	mu       sync.Mutex
	clusters map[string]map[string]refusalRecord
}

type refusalRecord struct {
	content, engine, message string
}

func newRefusalMemory() *refusalMemory {
	return &refusalMemory{clusters: map[string]map[string]refusalRecord{}}
}

// remember records that the cluster's Kyverno, with engine facts engine, refused the declaration
// d with message.
func (m *refusalMemory) remember(cluster string, d Declaration, engine, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byDecl := m.clusters[cluster]
	if byDecl == nil || len(byDecl) >= maxRefusals {
		byDecl = map[string]refusalRecord{}
		m.clusters[cluster] = byDecl
	}
	byDecl[d.Source] = refusalRecord{content: contentKey(d), engine: engine, message: message}
}

// refused returns Kyverno's message if the cluster refused this very content of d under the same
// engine facts; a record of other content or facts is dropped (the next write may be taken).
func (m *refusalMemory) refused(cluster string, d Declaration, engine string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.clusters[cluster][d.Source]
	if !ok {
		return "", false
	}
	if r.engine != engine || r.content != contentKey(d) {
		delete(m.clusters[cluster], d.Source)
		return "", false
	}
	return r.message, true
}

// forget drops what is remembered of the declaration in the cluster (it left the cluster).
func (m *refusalMemory) forget(cluster, source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clusters[cluster], source)
	if len(m.clusters[cluster]) == 0 {
		delete(m.clusters, cluster)
	}
}

// forgetCluster drops everything remembered of the cluster (it left the fleet).
func (m *refusalMemory) forgetCluster(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clusters, cluster)
}

// size is how many refusals are remembered, over every cluster (tests).
func (m *refusalMemory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, byDecl := range m.clusters {
		n += len(byDecl)
	}
	return n
}
