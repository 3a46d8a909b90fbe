package source

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func template(kind, namespace, name string, labels map[string]string) policyhubv1.PolicyTemplate {
	return policyhubv1.PolicyTemplate{
		APIVersion: "kyverno.io/v1", Kind: kind,
		Metadata: policyhubv1.TemplateMetadata{Name: name, Namespace: namespace, Labels: labels},
		Spec:     &runtime.RawExtension{Raw: []byte(`{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"validate":{"message":"m","pattern":{"metadata":{"labels":{"app":"?*"}}}}}]}`)},
	}
}

func TestInlineMembersArePinnedAndChecked(t *testing.T) {
	a, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "b", nil), template("Policy", "shop", "a", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Policies) != 2 || a.Policies[0].GetName() != "b" || a.Policies[1].GetNamespace() != "shop" {
		t.Fatalf("members %v: want ClusterPolicy b, then Policy shop/a (sorted by kind)", a.Policies)
	}
	if !strings.HasPrefix(a.Digest, "sha256:") || len(a.Digest) != 71 {
		t.Fatalf("digest %q", a.Digest)
	}
	again, err := Inline([]policyhubv1.PolicyTemplate{template("Policy", "shop", "a", nil), template("ClusterPolicy", "", "b", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != a.Digest {
		t.Fatalf("the same members in another order pin %s, want %s", again.Digest, a.Digest)
	}
	changed := template("ClusterPolicy", "", "b", nil)
	changed.Metadata.Annotations = map[string]string{"policies.kyverno.io/severity": "high"}
	other, err := Inline([]policyhubv1.PolicyTemplate{changed, template("Policy", "shop", "a", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest == a.Digest {
		t.Fatal("a changed member keeps the digest")
	}

	for _, tc := range []struct {
		name  string
		items []policyhubv1.PolicyTemplate
		want  string
	}{
		{"a member listed twice", []policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "a", nil), template("ClusterPolicy", "", "a", nil)}, "spec.source.inline[1]: ClusterPolicy a is listed at [0] already"},
		{"a member without a name", []policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "", nil)}, "spec.source.inline[0]: ClusterPolicy: metadata.name is required"},
		{"a ClusterPolicy with a namespace", []policyhubv1.PolicyTemplate{template("ClusterPolicy", "shop", "a", nil)}, `metadata.namespace "shop": a ClusterPolicy has none`},
		{"a Policy without a namespace", []policyhubv1.PolicyTemplate{template("Policy", "", "a", nil)}, "spec.source.inline[0]: Policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Inline(tc.items, DefaultLimits); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "a", nil), template("ClusterPolicy", "", "b", nil)}, Limits{MaxPolicies: 1, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20}); err == nil {
		t.Fatal("two members over a limit of one were taken")
	}
}

const libraryYAML = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {labels: {app: "?*"}}}}
`

func library(name string, data map[string]string) corev1.ConfigMap {
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policyhubv1.LabelPolicyLibrary: "true"}}, Data: data}
}

func TestConfigMapMembers(t *testing.T) {
	cms := []corev1.ConfigMap{
		library("b", map[string]string{"one.yaml": strings.ReplaceAll(libraryYAML, "%s", "one") + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", "README.md": "not read"}),
		library("a", map[string]string{"two.yml": strings.ReplaceAll(libraryYAML, "%s", "two")}),
	}
	a, err := ConfigMaps(cms, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Policies) != 2 || a.Skipped != 1 {
		t.Fatalf("got %d members and %d skipped, want 2 and the Namespace skipped", len(a.Policies), a.Skipped)
	}
	dup := append(cms, library("c", map[string]string{"again.yaml": strings.ReplaceAll(libraryYAML, "%s", "one")}))
	if _, err := ConfigMaps(dup, DefaultLimits); err == nil || !strings.Contains(err.Error(), "ClusterPolicy one is in ConfigMap b key one.yaml and ConfigMap c key again.yaml") {
		t.Fatalf("a policy in two ConfigMaps: %v", err)
	}
	bad := []corev1.ConfigMap{library("a", map[string]string{"bad.yaml": "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\n"})}
	if _, err := ConfigMaps(bad, DefaultLimits); err == nil || !strings.Contains(err.Error(), "ConfigMap a key bad.yaml") {
		t.Fatalf("a policy without a spec: %v", err)
	}
	if _, err := ConfigMaps(cms, Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 100}); err == nil {
		t.Fatal("ConfigMaps over the byte limit were taken")
	}
}

func TestSelectMembers(t *testing.T) {
	a, err := Inline([]policyhubv1.PolicyTemplate{
		template("ClusterPolicy", "", "pss-baseline", map[string]string{"level": "baseline"}),
		template("ClusterPolicy", "", "pss-restricted", map[string]string{"level": "restricted"}),
		template("Policy", "shop", "shop-only", nil),
	}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	names := func(sel *policyhubv1.MemberSelector) string {
		out, err := Select(a.Policies, sel)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, p := range out {
			n = append(n, p.GetName())
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct {
		name string
		sel  *policyhubv1.MemberSelector
		want string
	}{
		{"none", nil, "pss-baseline,pss-restricted,shop-only"},
		{"include kinds", &policyhubv1.MemberSelector{IncludeKinds: []string{"Policy"}}, "shop-only"},
		{"exclude kinds", &policyhubv1.MemberSelector{ExcludeKinds: []string{"Policy"}}, "pss-baseline,pss-restricted"},
		{"include names", &policyhubv1.MemberSelector{IncludeNames: []string{"pss-restricted", "absent"}}, "pss-restricted"},
		{"exclude names", &policyhubv1.MemberSelector{ExcludeNames: []string{"pss-restricted"}}, "pss-baseline,shop-only"},
		{"labels", &policyhubv1.MemberSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"level": "baseline"}}}, "pss-baseline"},
		{"all of them", &policyhubv1.MemberSelector{ExcludeKinds: []string{"Policy"}, LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "level", Operator: metav1.LabelSelectorOpExists}}}, ExcludeNames: []string{"pss-baseline"}}, "pss-restricted"},
	} {
		if got := names(tc.sel); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := Select(a.Policies, &policyhubv1.MemberSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "level", Operator: "Near"}}}}); err == nil {
		t.Fatal("an invalid label selector was taken")
	}
}

func TestChangesBetweenVersions(t *testing.T) {
	from, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "kept", nil), template("ClusterPolicy", "", "changed", nil), template("ClusterPolicy", "", "removed", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	changed := template("ClusterPolicy", "", "changed", map[string]string{"v": "2"})
	to, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "kept", nil), changed, template("ClusterPolicy", "", "added", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	added, chg, removed, omitted := Changes(from.Policies, to.Policies)
	if len(added) != 1 || added[0].Name != "added" || len(chg) != 1 || chg[0].Name != "changed" || len(removed) != 1 || removed[0].Name != "removed" || omitted != 0 {
		t.Fatalf("added %v changed %v removed %v omitted %d", added, chg, removed, omitted)
	}
	var many []policyhubv1.PolicyTemplate
	for i := range policyhubv1.MaxChangedMembers + 5 {
		many = append(many, template("ClusterPolicy", "", "p"+strings.Repeat("x", i), nil))
	}
	big, err := Inline(many, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	added, _, _, omitted = Changes(nil, big.Policies)
	if len(added) != policyhubv1.MaxChangedMembers || omitted != 5 {
		t.Fatalf("%d added, %d omitted: want %d and 5", len(added), omitted, policyhubv1.MaxChangedMembers)
	}
}

func TestSnapshotRoundTripAndTamper(t *testing.T) {
	a, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "one", nil), template("Policy", "shop", "two", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	set := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "pss", UID: "uid-1"}}
	cm, err := NewSnapshot("policyhub-system", set, a)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != "policyset-pss-"+a.Digest[7:19] || cm.Immutable == nil || !*cm.Immutable || cm.Labels[policyhubv1.LabelDeclarationUID] != "uid-1" {
		t.Fatalf("snapshot %s immutable %v labels %v", cm.Name, cm.Immutable, cm.Labels)
	}
	back, err := ReadSnapshot(cm, DefaultLimits, Pin{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest != a.Digest || len(back.Policies) != 2 || !equalJSON(back.Policies[1].Object, a.Policies[1].Object) {
		t.Fatalf("read back %v", back)
	}

	// Whoever may write ConfigMaps in the hub's namespace could change a snapshot: its members are
	// checked again as if read from the source.
	tampered := cm.DeepCopy()
	tampered.BinaryData[policyhubv1.SnapshotKey] = gzipped(t, `[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{}}]`)
	if _, err := ReadSnapshot(tampered, DefaultLimits, Pin{}); err == nil {
		t.Fatal("a Deployment in a snapshot was read as a member")
	}
	tampered.BinaryData[policyhubv1.SnapshotKey] = gzipped(t, strings.Repeat(" ", 2<<20))
	if _, err := ReadSnapshot(tampered, Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20}, Pin{}); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a snapshot inflating past the limit: %v", err)
	}
	delete(tampered.BinaryData, policyhubv1.SnapshotKey)
	if _, err := ReadSnapshot(tampered, DefaultLimits, Pin{}); err == nil {
		t.Fatal("an empty snapshot was read")
	}

	// A library that does not compress into a ConfigMap is refused with what to do.
	var huge []*unstructured.Unstructured
	for i := range 200 {
		p := a.Policies[0].DeepCopy()
		p.SetName("p" + strings.Repeat("y", i))
		p.SetAnnotations(map[string]string{"noise": randomText(i, 8<<10)})
		huge = append(huge, p)
	}
	if _, err := NewSnapshot("policyhub-system", set, &Artifact{Digest: a.Digest, Policies: huge}); err == nil || !strings.Contains(err.Error(), "split the library") {
		t.Fatalf("an oversized snapshot: %v", err)
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// randomText is n characters that do not compress, the same for the same seed.
func randomText(seed, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = letters[x%uint32(len(letters))]
	}
	return string(b)
}
