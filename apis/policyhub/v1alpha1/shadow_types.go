package v1alpha1

import (
	"math"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shadows: a report-only copy of a candidate policy, shipped beside (or instead of) the live
// one to learn what the candidate would do before it is enforced. A shadow never denies a
// request (Kyverno's admission is off for it, background scans on) and never counts toward
// compliance: agents report its results apart (spec.shadows of a summary), the hub reads them
// only into a declaration's preview. The conventions below are shared by the hub that ships
// shadows, the agent that reports them and the CLI that shows them.
const (
	// LabelShadow marks a shipped policy as a shadow; its value is ShadowValue.
	LabelShadow = "policyhub.io/shadow"
	ShadowValue = "true"
	// AnnotationShadowOf, on a shadow, names the live policy it is compared with in the same
	// cluster as Kyverno's reports name policies (PolicyRef: "name" or "namespace/name"), with
	// the kind before a '/': "ClusterPolicy/disallow-latest-tag". Absent when no live version
	// runs there (a new policy): then every resource the shadow fails is newly failing.
	AnnotationShadowOf = "policyhub.io/shadow-of"
	// ShadowPrefix starts every shadow's name, so that a shadow's results are told apart from
	// any other policy's by name alone, even by a hub or agent that does not read labels.
	// Templates may not use it (their names are refused at admission).
	ShadowPrefix = "policyhub-shadow-"
	// maxShadowBase is the longest base name a shadow keeps whole: the prefix and it are at
	// most 63 characters, Kyverno's limit.
	maxShadowBase = 63 - len(ShadowPrefix)
)

// ShadowName is the name of the shadow of the policy named name: ShadowPrefix and name, or, when
// that would be longer than 63 characters, ShadowPrefix and name cut and hashed as GeneratedName
// does (so two long names never share a shadow).
func ShadowName(name string) string {
	if len(name) <= maxShadowBase {
		return ShadowPrefix + name
	}
	return ShadowPrefix + shortHashedName(name, maxShadowBase)
}

// shortHashedName is name cut to fit n characters with '-' and generatedNameHash hex digits of
// its sha256 after it.
func shortHashedName(name string, n int) string {
	full := hashedName(name, name)
	hash := full[len(full)-generatedNameHash:]
	base := strings.TrimRight(full[:min(len(full)-generatedNameHash-1, n-generatedNameHash-1)], "-.")
	return base + "-" + hash
}

// IsShadow says whether an object with these labels is a shadow.
func IsShadow(labels map[string]string) bool { return labels[LabelShadow] == ShadowValue }

// IsShadowName says whether a policy's name is a shadow's: its results are a preview's, never
// compliance.
func IsShadowName(name string) bool { return strings.HasPrefix(name, ShadowPrefix) }

// ShadowOfValue is AnnotationShadowOf's value for the live policy of kind, namespace and name.
func ShadowOfValue(kind, namespace, name string) string {
	return kind + "/" + PolicyRef(namespace, name)
}

// ParseShadowOf reads AnnotationShadowOf's value back: kind, namespace and name (ok false when
// it is not one).
func ParseShadowOf(value string) (kind, namespace, name string, ok bool) {
	kind, ref, found := strings.Cut(value, "/")
	if !found || kind == "" || ref == "" {
		return "", "", "", false
	}
	if ns, n, namespaced := strings.Cut(ref, "/"); namespaced {
		if ns == "" || n == "" || strings.Contains(n, "/") {
			return "", "", "", false
		}
		return kind, ns, n, true
	}
	return kind, "", ref, true
}

// Bounds of what a summary says about shadows.
const (
	// MaxSummaryShadows bounds spec.shadows: a cluster runs few previews at a time.
	MaxSummaryShadows = 50
	// MaxShadowNamed bounds the resources a shadow entry names (newly failing, differing).
	MaxShadowNamed = 10
)

// Verdict is one policy's result for one resource, all its rules together: fail when any rule
// failed or erred, else pass when any passed, else skip.
// +kubebuilder:validation:Enum=pass;fail;skip;none
type Verdict string

const (
	VerdictPass Verdict = "pass"
	VerdictFail Verdict = "fail"
	VerdictSkip Verdict = "skip"
	// VerdictNone: the policy has no result for the resource.
	VerdictNone Verdict = "none"
)

// Known says whether the verdict is one of the four.
func (v Verdict) Known() bool {
	return v == VerdictPass || v == VerdictFail || v == VerdictSkip || v == VerdictNone
}

// ShadowResults are a shadow's results in one cluster, each resource's verdict compared with the
// live policy's (AnnotationShadowOf) in the same report.
type ShadowResults struct {
	// Name of the shadow policy (it starts with ShadowPrefix).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the shadow policy; empty for cluster-scoped kinds.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Kind of the shadow policy.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// Of is the live policy compared with, as AnnotationShadowOf names it; empty when none.
	// +optional
	// +kubebuilder:validation:MaxLength=381
	Of string `json:"of,omitempty"`
	// ContentHash is the shadow object's policyhub.io/content-hash: which version of the
	// candidate these results are of.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	ContentHash string `json:"contentHash,omitempty"`
	// Resources the shadow has a result for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Resources int64 `json:"resources,omitempty"`
	// WouldFail counts the resources the shadow fails.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WouldFail int64 `json:"wouldFail,omitempty"`
	// NewlyFailing counts the resources the shadow fails and the live policy does not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NewlyFailing int64 `json:"newlyFailing,omitempty"`
	// Same counts the resources both policies have the same verdict for (a skip and no result
	// are alike: the policy did not apply).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Same int64 `json:"same,omitempty"`
	// Differ counts the resources both policies have a verdict for, not the same.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Differ int64 `json:"differ,omitempty"`
	// OnlyShadow counts the resources only the shadow has a result for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OnlyShadow int64 `json:"onlyShadow,omitempty"`
	// OnlyLive counts the resources only the live policy has a result for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OnlyLive int64 `json:"onlyLive,omitempty"`
	// FirstNewlyFailing names the first newly failing resources (by namespace, kind, name); at
	// most 10.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	FirstNewlyFailing []ResourceRef `json:"firstNewlyFailing,omitempty"`
	// FirstDiffering names the first resources whose verdicts differ or that only one policy
	// has a result for; at most 10.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	FirstDiffering []VerdictDifference `json:"firstDiffering,omitempty"`
}

// VerdictDifference is one resource two policies judge differently.
type VerdictDifference struct {
	// Resource is the resource judged.
	Resource ResourceRef `json:"resource"`
	// Shadow is the shadow's verdict.
	Shadow Verdict `json:"shadow"`
	// Live is the live policy's verdict.
	Live Verdict `json:"live"`
}

// PreviewSpec asks for a preview: a shadow of the candidate in every placed cluster, its results
// in status.preview.
type PreviewSpec struct {
	// Template is the candidate, previewed beside the live spec.template (which keeps running).
	// Empty previews spec.template itself and holds it back: nothing but the shadow ships until
	// spec.preview is removed (only when the FleetPolicy is created; a policy already in force
	// puts its candidate here instead).
	// +optional
	Template *PolicyTemplate `json:"template,omitempty"`
}

// MaxPreviewNamed bounds the resources a preview's status names.
const MaxPreviewNamed = 20

// MaxPreviewClusters bounds the clusters a preview's status names (those with the most newly
// failing resources); every cluster's own counts are in its ClusterStatusSlice entry.
const MaxPreviewClusters = 20

// PreviewStatus is what a preview learned: totals over the placed clusters that reported.
type PreviewStatus struct {
	// Revision is the candidate's template revision.
	Revision string `json:"revision"`
	// Shadow is the shadow policy's name in the clusters.
	Shadow string `json:"shadow"`
	// StartedAt is when the hub first shipped this revision's shadow.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when every placed cluster had reported the shadow's results; absent while
	// some have not.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Clusters is how many clusters the shadow is placed in.
	Clusters int32 `json:"clusters"`
	// Reported is how many of them reported its results.
	Reported int32 `json:"reported"`
	// Resources counts the resources the shadow has a result for, over the clusters that reported.
	Resources int64 `json:"resources"`
	// WouldFail counts the resources the candidate would fail, over the clusters that reported.
	WouldFail int64 `json:"wouldFail"`
	// NewlyFailing counts the resources the candidate would fail and the live version does not.
	NewlyFailing int64 `json:"newlyFailing"`
	// Same counts the resources the candidate and the live version judge alike.
	// +optional
	Same int64 `json:"same,omitempty"`
	// Differ counts the resources both judge, differently.
	// +optional
	Differ int64 `json:"differ,omitempty"`
	// OnlyShadow counts the resources only the candidate has a result for.
	// +optional
	OnlyShadow int64 `json:"onlyShadow,omitempty"`
	// OnlyLive counts the resources only the live version has a result for.
	// +optional
	OnlyLive int64 `json:"onlyLive,omitempty"`
	// TopClusters are the clusters with the most would-fail resources; at most 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	TopClusters []ClusterPreview `json:"topClusters,omitempty"`
	// FirstNewlyFailing names newly failing resources, with their cluster; at most 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	FirstNewlyFailing []ClusterResource `json:"firstNewlyFailing,omitempty"`
	// FirstDiffering names resources the candidate and the live version judge differently, with
	// their cluster and both verdicts; at most 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	FirstDiffering []ClusterDifference `json:"firstDiffering,omitempty"`
}

// ClusterDifference is a resource of a cluster two policies judge differently.
type ClusterDifference struct {
	// Cluster is the cluster's name.
	Cluster string `json:"cluster"`
	// VerdictDifference is the resource and both verdicts.
	VerdictDifference `json:",inline"`
}

// ClusterPreview is a preview's counts in one cluster.
type ClusterPreview struct {
	// Cluster is the cluster's name (in a ClusterStatusSlice entry: empty, the entry's).
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Reported says whether the cluster's agent reported the shadow's results for the
	// candidate's current revision.
	Reported bool `json:"reported"`
	// Resources counts the resources the shadow has a result for in the cluster.
	// +optional
	Resources int64 `json:"resources,omitempty"`
	// WouldFail counts the resources the candidate would fail in the cluster.
	// +optional
	WouldFail int64 `json:"wouldFail,omitempty"`
	// NewlyFailing counts those the live version does not fail.
	// +optional
	NewlyFailing int64 `json:"newlyFailing,omitempty"`
	// Same counts the resources the candidate and the live version judge alike.
	// +optional
	Same int64 `json:"same,omitempty"`
	// Differ counts the resources both judge, differently.
	// +optional
	Differ int64 `json:"differ,omitempty"`
	// OnlyShadow counts the resources only the candidate judges.
	// +optional
	OnlyShadow int64 `json:"onlyShadow,omitempty"`
	// OnlyLive counts the resources only the live version judges.
	// +optional
	OnlyLive int64 `json:"onlyLive,omitempty"`
	// FirstNewlyFailing names the first newly failing resources in the cluster; at most 3 (the
	// agent's summary names up to 10).
	// +optional
	// +kubebuilder:validation:MaxItems=3
	FirstNewlyFailing []ResourceRef `json:"firstNewlyFailing,omitempty"`
	// FirstDiffering names the first resources the candidate and the live version judge
	// differently in the cluster, with both verdicts; at most 3.
	// +optional
	// +kubebuilder:validation:MaxItems=3
	FirstDiffering []VerdictDifference `json:"firstDiffering,omitempty"`
}

// Differing counts the resources the candidate and the live version do not judge alike: judged
// differently, or by one of them only.
func (p *ClusterPreview) Differing() int64 {
	return satAdd(satAdd(p.Differ, p.OnlyShadow), p.OnlyLive)
}

// satAdd adds two counts, a negative one as 0, stopping at the largest int64.
func satAdd(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MaxClusterPreviewNamed bounds the resources a cluster's preview entry names.
const MaxClusterPreviewNamed = 3

// ClusterResource is a resource in a cluster.
type ClusterResource struct {
	// Cluster is the cluster's name.
	Cluster string `json:"cluster"`
	// Resource is the resource.
	Resource ResourceRef `json:"resource"`
}
