package collect

import (
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/types"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// PolicyKey names a policy: its kind (e.g. ClusterPolicy, ValidatingPolicy; empty when a report
// does not say), namespace (empty for cluster-scoped policies) and name, and the engine whose it
// is (empty: Kyverno, whose reports name no engine).
type PolicyKey struct {
	Engine    policyhubv1.PolicyEngine
	Kind      string
	Namespace string
	Name      string
}

// Resource is the resource a result is about.
type Resource struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// UID, when the report carries it; the application is looked up by it.
	UID types.UID
}

// Counts are the results of one policy for one resource, by kind of result.
type Counts struct {
	Pass, Fail, Warn, Error, Skip int32
}

// PolicyCounts are one policy's results in one report. The agent keeps one for every policy of
// every report of the cluster (100,000 at 100,000 results), so it is small: the policy and its
// labels are handles to one shared copy, and the time is in seconds, as reports give it (48
// bytes instead of 128). At 100,000 results that took the agent's RSS from 106 to 92 MiB (make
// bench-agent).
type PolicyCounts struct {
	policy unique.Handle[PolicyKey]
	labels unique.Handle[resultLabels]
	Counts Counts
	// oldest is the Unix time of the oldest of these results (0 when none says).
	oldest int64
}

// resultLabels are the severity and category results carry (from the policy's annotations).
type resultLabels struct{ severity, category string }

// NewPolicyCounts returns counts of policy's results, labelled with the severity and category
// they carry.
func NewPolicyCounts(policy PolicyKey, severity, category string, counts Counts) PolicyCounts {
	return PolicyCounts{policy: unique.Make(policy), labels: unique.Make(resultLabels{severity, category}), Counts: counts}
}

// Policy is the policy the results are of.
func (pc *PolicyCounts) Policy() PolicyKey { return pc.policy.Value() }

// PolicyHandle is the policy's shared handle: equal handles are equal policies, compared as
// pointers (a summary compares millions).
func (pc *PolicyCounts) PolicyHandle() unique.Handle[PolicyKey] { return pc.policy }

// Severity is the severity the results carry.
func (pc *PolicyCounts) Severity() string { return pc.labels.Value().severity }

// Category is the category the results carry.
func (pc *PolicyCounts) Category() string { return pc.labels.Value().category }

// Oldest is when the oldest of these results was made (zero when none says).
func (pc *PolicyCounts) Oldest() time.Time {
	if pc.oldest == 0 {
		return time.Time{}
	}
	return time.Unix(pc.oldest, 0).UTC()
}

// Saw records that one of the results was made at t (zero: unknown), keeping the oldest.
func (pc *PolicyCounts) Saw(t time.Time) {
	if s := t.Unix(); !t.IsZero() && (pc.oldest == 0 || s < pc.oldest) {
		pc.oldest = s
	}
}

// Violation is one fail or error result.
type Violation struct {
	Policy   PolicyKey
	Rule     string
	Result   string // "fail" or "error"
	Severity string
	Category string
	// Message, already cut to MaxMessage bytes.
	Message string
	Time    time.Time
}

// MaxMessage bounds the messages kept from results and Events (the API's limit).
const MaxMessage = 512

// Digest is one policy report reduced to what a summary needs: the full report (every result,
// with every message) is never kept. A report about one resource (Kyverno's default) has one
// Digest; results about several resources are split into one Digest per resource.
type Digest struct {
	// Report identifies the report it came from: "<api> <kind> <namespace>/<name>".
	Report string
	// Resource is the report's scope (or the results' resource); zero when the results are about
	// no resource.
	Resource Resource
	Policies []PolicyCounts
	// Violations are the report's fail and error results.
	Violations []Violation
	// Exceptions count the resource's results Kyverno PolicyExceptions exempted, per exception;
	// nil (nothing but the slice header) for most resources, which no exception exempts.
	Exceptions []ExceptionCount
}

// ExceptionCount is how many of a resource's results one Kyverno PolicyException exempted: skip
// (or pass) results whose property "exceptions" names it.
type ExceptionCount struct {
	// Name is the exception's name as the results give it (no namespace), at most
	// MaxExceptionName bytes, one shared copy (see shared).
	Name    string
	Results int32
}

// MaxExceptionName bounds the exception names kept from results (the API's limit), and
// MaxExceptionsPerResult how many exceptions one result is counted for: Kyverno names the few
// exceptions that exempted a result, and a report is not trusted to be reasonable.
const (
	MaxExceptionName       = policyhubv1.MaxSummaryNameLength
	MaxExceptionsPerResult = 8
)

// Block is one admission Kyverno refused, from its policy-violation Event. Enforce denials write
// no report: Events are the only trace.
type Block struct {
	Policy   PolicyKey
	Rule     string
	Resource Resource
	Message  string
	Time     time.Time
	// Count is how many times the Event says it happened (repeated denials share an Event).
	Count int32
}

// PolicyInfo is what a policy's annotations say about it (policies.kyverno.io/title, category,
// severity).
type PolicyInfo struct {
	Title, Category, Severity string
}

// ShadowInfo is what a shadow policy's annotations say about it: the live policy it is compared
// with (policyhub.io/shadow-of, empty when none) and which version of the candidate it is
// (policyhub.io/content-hash). Each is cut to its bound (MaxShadowOf, MaxShadowContentHash)
// with a mark that no policy name or hash contains, so a cut value never names another policy.
type ShadowInfo struct {
	Of, ContentHash string
}

// Bounds of a shadow's annotations as kept: MaxShadowOf is the longest value Validate accepts
// in spec.shadows[].of (a kind, a '/' and a "namespace/name" reference: 381 bytes; the CRD
// allows 400) and MaxShadowContentHash the CRD's and Validate's bound of its contentHash.
const (
	MaxShadowOf          = policyhubv1.MaxSummaryKindLength + 1 + policyhubv1.MaxSummaryRefLength
	MaxShadowContentHash = 100
)

// Snapshot is everything the agent knows about the cluster's compliance at one moment.
type Snapshot struct {
	Digests  []*Digest
	Blocks   []*Block
	Policies map[PolicyKey]PolicyInfo
	// Shadows are the policies labelled policyhub.io/shadow=true, with their annotations; each
	// is in Policies too. Results of shadows (known here or not: a shadow is told by its name)
	// are never compliance: a summary reports them apart.
	Shadows map[PolicyKey]ShadowInfo
	// Applications maps a resource's UID to its application (the value of its application
	// label); resources without the label are absent.
	Applications map[types.UID]string
	Engine       policyhubv1.EngineInfo
	// DryRuns counts, per legacy policy (ClusterPolicy, Policy), the server-side dry-runs Kyverno
	// refused over the last hour: Blocks count them too (Kyverno's Events do not tell them apart).
	DryRuns map[PolicyKey]int64
}
