package summarize

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Limits of the API (the CRD's MaxItems and MaxLength); larger options are capped to them, since
// the hub would refuse the summary otherwise.
const (
	maxViolations   = policyhubv1.MaxSummaryViolations
	maxPolicies     = policyhubv1.MaxSummaryPolicies
	maxApplications = policyhubv1.MaxSummaryApplications
	maxExceptions   = policyhubv1.MaxSummaryExceptions
	maxNamespaces   = policyhubv1.MaxSummaryNamespaces

	defaultMaxViolations = 50
	defaultMaxBytes      = 512 * 1024
)

// Options bound a summary.
type Options struct {
	// Cluster is the managed cluster's name, written to spec.cluster.
	Cluster string
	// MaxViolations is how many violations are kept (the top ones); 0 means 50; capped at 200.
	MaxViolations int
	// MaxPolicies is how many policies are kept; 0 means (and at most) 1000.
	MaxPolicies int
	// MaxApplications is how many application × policy entries are kept; 0 means (and at most) 2000.
	MaxApplications int
	// MaxExceptions is how many exceptions are kept (those with the most results); 0 means (and
	// at most) 200.
	MaxExceptions int
	// MaxNamespaces is how many namespaces are kept (those with the most fail and error
	// results); 0 means (and at most) 1000.
	MaxNamespaces int
	// MaxBytes bounds the JSON of the spec as pushed (with generatedAt); 0 means 512 KiB.
	MaxBytes int
}

func (o Options) withDefaults() Options {
	o.MaxViolations = bound(o.MaxViolations, defaultMaxViolations, maxViolations)
	o.MaxPolicies = bound(o.MaxPolicies, maxPolicies, maxPolicies)
	o.MaxApplications = bound(o.MaxApplications, maxApplications, maxApplications)
	o.MaxExceptions = bound(o.MaxExceptions, maxExceptions, maxExceptions)
	o.MaxNamespaces = bound(o.MaxNamespaces, maxNamespaces, maxNamespaces)
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	return o
}

func bound(v, def, limit int) int {
	if v <= 0 {
		return def
	}
	return min(v, limit)
}

// Summarize folds a snapshot into a PolicyReportSummarySpec, without GeneratedAt (the pusher sets
// it, so that an unchanged summary keeps its content hash).
func Summarize(s collect.Snapshot, o Options) policyhubv1.PolicyReportSummarySpec {
	o = o.withDefaults()
	f := newFold(s)
	f.register()
	f.resolve()
	topApps := newTopK(o.MaxApplications, f.compareAppEntryPriority)
	f.count(topApps)

	// The count limits keep the entries that matter most, in that order, so that the byte limit
	// can cut from the tail.
	pols, allPols := f.topPolicies(o.MaxPolicies)
	apps, allApps := f.applicationSummaries(topApps.sorted()), f.appEntries
	viols, allViols := f.topViolations(o.MaxViolations)
	excs, allExcs := f.topExceptions(o.MaxExceptions)
	nss, allNss := f.topNamespaces(o.MaxNamespaces)
	nPol, nApp, nViol, nExc, nNs := len(pols), len(apps), len(viols), len(excs), len(nss)
	// Shadows are few (at most 50), and count towards the byte bound as all the rest does.
	shadows, shadowsCut := f.shadowResults()
	nShadow, nNamed := len(shadows), policyhubv1.MaxShadowNamed

	base := policyhubv1.PolicyReportSummarySpec{
		Cluster:        o.Cluster,
		Engine:         copyEngine(s.Engine),
		Totals:         f.totals,
		Blocked:        f.blocked,
		BlockedDryRuns: f.blockedDryRuns,
	}
	for {
		spec := assemble(base, pols[:nPol], apps[:nApp], viols[:nViol], excs[:nExc], nss[:nNs])
		spec.Shadows = cutShadows(shadows, nShadow, nNamed)
		spec.Truncated = truncation(allPols-nPol, allApps-nApp, allViols-int64(nViol), allExcs-nExc, allNss-nNs, shadowsCut+len(shadows)-nShadow)
		if size(spec) < o.MaxBytes || nPol+nApp+nViol+nExc+nNs+nShadow == 0 {
			spec.ContentHash = Hash(spec)
			return spec
		}
		// Applications are the most numerous, and the per-policy view stands without them;
		// namespaces next (a view of their own); violations are examples, and so are the
		// resources shadows name; exceptions (at most 200 short entries) next; then the shadows
		// themselves, previews, before the policies, which are compliance (a shadow left out is
		// counted in spec.truncated.shadows; the hub has not heard of it from this cluster).
		switch {
		case nApp > 0:
			nApp /= 2
		case nNs > 0:
			nNs /= 2
		case nViol > 0:
			nViol /= 2
		case nShadow > 0 && nNamed > 0:
			nNamed /= 2
		case nExc > 0:
			nExc /= 2
		case nShadow > 0:
			nShadow /= 2
		default:
			nPol /= 2
		}
	}
}

// Hash returns the content hash of a spec: the hex sha256 of its JSON without GeneratedAt and
// ContentHash, so a summary rebuilt from an unchanged cluster hashes the same. encoding/json writes
// struct fields in declaration order, so the JSON of a spec is canonical.
func Hash(spec policyhubv1.PolicyReportSummarySpec) string {
	// What the pusher stamps on every write is not content.
	spec.GeneratedAt = nil
	spec.HeartbeatInterval = nil
	spec.ContentHash = ""
	data, err := json.Marshal(spec)
	if err != nil {
		// Unreachable: the spec holds strings, integers and times only.
		panic("summarize: marshal spec: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// The size is measured as the spec will be written: with its content hash, and with what the
// pusher adds after Summarize (generatedAt, and a little room for heartbeatInterval).
var (
	hashPlaceholder = strings.Repeat("0", sha256.Size*2)
	timePlaceholder = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
)

const pusherRoom = 64

func size(spec policyhubv1.PolicyReportSummarySpec) int {
	spec.ContentHash = hashPlaceholder
	spec.GeneratedAt = &timePlaceholder
	data, err := json.Marshal(spec)
	if err != nil {
		panic("summarize: marshal spec: " + err.Error())
	}
	return len(data) + pusherRoom
}

// assemble builds the spec from the kept entries, in the API's order: policies by (namespace,
// name, kind), applications by (namespace, name, policy), namespaces by name, violations most
// important first, exceptions most results first.
func assemble(base policyhubv1.PolicyReportSummarySpec, pols []policyhubv1.PolicySummary, apps []policyhubv1.ApplicationSummary,
	viols []policyhubv1.Violation, excs []policyhubv1.ExceptionResults, nss []policyhubv1.NamespaceSummary) policyhubv1.PolicyReportSummarySpec {
	spec := base
	if len(pols) > 0 {
		spec.Policies = slices.SortedFunc(slices.Values(pols), comparePolicyKey)
	}
	if len(apps) > 0 {
		spec.Applications = slices.SortedFunc(slices.Values(apps), compareApplicationKey)
	}
	if len(viols) > 0 {
		spec.Violations = slices.Clone(viols)
	}
	if len(excs) > 0 {
		spec.Exceptions = slices.Clone(excs)
	}
	if len(nss) > 0 {
		spec.Namespaces = slices.SortedFunc(slices.Values(nss), func(a, b policyhubv1.NamespaceSummary) int {
			return strings.Compare(a.Namespace, b.Namespace)
		})
	}
	return spec
}

func truncation(pols, apps int, viols int64, excs, nss, shadows int) *policyhubv1.Truncation {
	if pols == 0 && apps == 0 && viols == 0 && excs == 0 && nss == 0 && shadows == 0 {
		return nil
	}
	return &policyhubv1.Truncation{Policies: int32(pols), Applications: int32(apps), Violations: viols, Exceptions: int32(excs), Namespaces: int32(nss), Shadows: int32(shadows)}
}

func copyEngine(e policyhubv1.EngineInfo) policyhubv1.EngineInfo {
	// A set: sorted, so the order the collector found the APIs in does not change the hash.
	if e.ReportAPIs != nil {
		e.ReportAPIs = slices.Sorted(slices.Values(e.ReportAPIs))
	}
	return e
}
