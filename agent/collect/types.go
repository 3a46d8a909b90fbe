package collect

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// PolicyKey names a policy: its kind (e.g. ClusterPolicy, ValidatingPolicy; empty when a report
// does not say), namespace (empty for cluster-scoped policies) and name.
type PolicyKey struct {
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

// PolicyCounts are one policy's results in one report.
type PolicyCounts struct {
	Policy PolicyKey
	// Severity and Category as the results carry them (from the policy's annotations).
	Severity, Category string
	Counts             Counts
	// Oldest is when the oldest of these results was made (zero when none says).
	Oldest time.Time
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
}

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

// Snapshot is everything the agent knows about the cluster's compliance at one moment.
type Snapshot struct {
	Digests  []*Digest
	Blocks   []*Block
	Policies map[PolicyKey]PolicyInfo
	// Applications maps a resource's UID to its application (the value of its application
	// label); resources without the label are absent.
	Applications map[types.UID]string
	Engine       policyhubv1.EngineInfo
}
