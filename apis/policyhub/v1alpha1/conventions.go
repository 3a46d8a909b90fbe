package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Conventions the agent, the hub and the CLI share: each is defined here once, so that what an
// agent writes and what the hub and the CLI read cannot drift apart.

// PolicyRef names a policy the way Kyverno's reports do, and so summaries: "name" for a
// cluster-scoped policy, "namespace/name" for a namespaced one (e.g. applications[].policy).
func PolicyRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// severities are Kyverno's severities (policies.kyverno.io/severity), most severe first.
var severities = [...]string{"critical", "high", "medium", "low", "info"}

// SeverityRank orders severities for sorting, most severe first (critical is 0); an unknown or
// missing severity ranks after every known one. Case does not matter.
func SeverityRank(severity string) int {
	for i, s := range severities {
		if strings.EqualFold(severity, s) {
			return i
		}
	}
	return len(severities)
}

// Accepted says why the hub does not aggregate a summary (nil when it does): it reads only the
// summary named SummaryName in a cluster's namespace, written for that cluster (an agent may
// write only its own cluster's namespace; a summary claiming another cluster is refused).
func (s *PolicyReportSummary) Accepted() error {
	if s.Name != SummaryName {
		return fmt.Errorf("the hub reads only the summary named %q in each cluster's namespace; %q is not aggregated", SummaryName, s.Name)
	}
	if s.Spec.Cluster != s.Namespace {
		return fmt.Errorf("spec.cluster %q does not match the namespace %q the summary was written to: each cluster's agent writes only its own namespace, so this summary is not aggregated", s.Spec.Cluster, s.Namespace)
	}
	return nil
}

// generatedNameCut and generatedNameHash make a shortened generated name: the cleaned name cut
// to 52 characters, '-', then 10 hex digits of a hash: 63 characters, a DNS-1123 label's limit.
const (
	generatedNameCut  = 52
	generatedNameHash = 10
)

// GeneratedName is the name policyhub gives an object it makes from other names, such as the
// Kyverno policies an ApplicationPolicy renders (e.g. "<applicationpolicy>-deployment-<resource>").
// A full that is already a DNS-1123 label (lowercase alphanumerics and '-', at most 63
// characters) is kept as it is. Any other is cleaned (lowercased, every other character replaced
// by '-', no leading or trailing '-'), cut to 52 characters, and ends with '-' and the first 10
// hex digits of the sha256 of full, so that two fulls never share a name because one was
// cleaned or cut.
func GeneratedName(full string) string {
	if len(validation.IsDNS1123Label(full)) == 0 {
		return full
	}
	return hashedName(full, full)
}

// KubeVelaEntryName is the name of the ApplicationPolicy made for the kyverno-policy entry
// named entry of the KubeVela Application named application: "<application>-<entry>", cleaned
// and cut as GeneratedName does, always followed by '-' and the first 10 hex digits of the
// sha256 of "<application>/<entry>". The hash is of the pair, not of the joined name, and is
// always there: joined with '-', application a-b's entry c and application a's entry b-c are
// both a-b-c, and two Applications of a namespace must never claim one ApplicationPolicy (the
// second would be refused it, or replace its policy). '/' cannot be in an Application's name, so
// "<application>/<entry>" stands for one pair only.
//
// config/kubevela/kyverno-policy.yaml computes the same name in CUE (KubeVela applies the
// ApplicationPolicy under it); an e2e test compares the two under the real vela-core.
func KubeVelaEntryName(application, entry string) string {
	return hashedName(application+"-"+entry, application+"/"+entry)
}

// hashedName is readable, cleaned and cut to generatedNameCut characters, then '-' and
// generatedNameHash hex digits of the sha256 of hashed: a DNS-1123 label.
func hashedName(readable, hashed string) string {
	cleaned := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(readable))
	cleaned = strings.Trim(cleaned, "-")
	if len(cleaned) > generatedNameCut {
		cleaned = cleaned[:generatedNameCut]
	}
	cleaned = strings.TrimRight(cleaned, "-")
	sum := sha256.Sum256([]byte(hashed))
	hash := hex.EncodeToString(sum[:])[:generatedNameHash]
	if cleaned == "" {
		return hash
	}
	return cleaned + "-" + hash
}

// ExceptionObjectName is the name of the Kyverno PolicyException a FleetPolicyException renders
// into in every cluster: "fpex-<namespace>-<name>", cleaned and cut as GeneratedName does,
// always followed by '-' and 10 hex digits of the sha256 of "<namespace>/<name>". It is unique
// per hub (Kyverno's reports name the exceptions that exempted a result by name alone, so the
// hub can tell its exceptions' results apart), and the same in every cluster.
func ExceptionObjectName(namespace, name string) string {
	return hashedName("fpex-"+namespace+"-"+name, namespace+"/"+name)
}

// DefaultExceptionNamespace is where the hub writes Kyverno PolicyExceptions in a managed
// cluster: the namespace Kyverno must read exceptions from (--exceptionNamespace), and one the
// hub already writes (its sync Lease's), so that local users need no right to write there.
const DefaultExceptionNamespace = SyncLeaseNamespace

// LabelExceptionNamespace, on a cluster (its cluster-gateway credential Secret or OCM
// ManagedCluster), names the namespace its Kyverno reads PolicyExceptions from
// (--exceptionNamespace), when it is not DefaultExceptionNamespace.
const LabelExceptionNamespace = "policyhub.io/kyverno-exception-namespace"

// Hub replicas share the fleet by cluster (hub/shard). Each replica holds a Lease of its own in
// the hub's namespace, named ReplicaLeaseName and labelled LabelReplicaOf with the hub's id: the
// live replicas are the live Leases. The hub, its CLI and its alerts read the same names.
const (
	// LabelReplicaOf, on a replica's Lease, is the id of the hub the replica belongs to.
	LabelReplicaOf = "policyhub.io/replica-of"
	// LabelPinnedReplica, on a cluster (its cluster-gateway credential Secret), names the replica
	// that must own it while that replica runs (for debugging); otherwise it is ignored.
	LabelPinnedReplica = "policyhub.io/hub-replica"
	// LabelWorkedBy, on a cluster's PolicyReportSummary, names the replica that works the
	// cluster: that replica sets it, and caches only the summaries that name it.
	LabelWorkedBy = "policyhub.io/worked-by"
	// replicaLeasePrefix starts every replica Lease's name.
	replicaLeasePrefix = "policyhub-replica."
)

// ReplicaLeaseName is the name of the Lease replica holds for hub hubID: "policyhub-replica.<hub
// id, lowercased>.<replica>". The replica name (a pod's name, by default) must make it a valid
// Lease name; ReplicaFromLease reads it back.
func ReplicaLeaseName(hubID, replica string) string {
	return replicaLeasePrefix + strings.ToLower(hubID) + "." + replica
}

// ReplicaFromLease is the replica name of a Lease named by ReplicaLeaseName for hubID ("" when
// the name is not one).
func ReplicaFromLease(hubID, leaseName string) string {
	prefix := replicaLeasePrefix + strings.ToLower(hubID) + "."
	if !strings.HasPrefix(leaseName, prefix) {
		return ""
	}
	return strings.TrimPrefix(leaseName, prefix)
}
