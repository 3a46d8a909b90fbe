package v1alpha1

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What a Kyverno version serves and enforces: one home for the facts the agent reports, the hub
// renders and phases by, and the CLI shows (docs/kyverno-versions.md).

// LegacyKinds are Kyverno's kyverno.io kinds that Kyverno 1.20 keeps served but no longer
// executes, and whose creates and updates it denies (deletes are allowed); its Helm chart refuses
// to upgrade while any exists.
var LegacyKinds = []string{"ClusterPolicy", "Policy", "ClusterCleanupPolicy", "CleanupPolicy", "PolicyException"}

// IsLegacyKind says whether gk is one of Kyverno's legacy kinds (any kyverno.io version).
func IsLegacyKind(gk schema.GroupKind) bool {
	if gk.Group != "kyverno.io" {
		return false
	}
	for _, k := range LegacyKinds {
		if gk.Kind == k {
			return true
		}
	}
	return false
}

// LegacyExecutionRemoved is the first Kyverno minor version that no longer executes the legacy kinds.
const LegacyExecutionRemoved = 20

// KyvernoMinor reads the minor version of a Kyverno 1.x version such as v1.19.1 or 1.20.0-rc.1;
// ok is false when version does not say.
func KyvernoMinor(version string) (minor int, ok bool) {
	v := strings.TrimPrefix(version, "v")
	major, rest, found := strings.Cut(v, ".")
	if !found || major != "1" {
		return 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end == 0 {
		return 0, false
	}
	if end > 0 {
		rest = rest[:end]
	}
	minor, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return minor, true
}

// KyvernoEnforcesLegacy says whether a Kyverno of version executes the legacy kinds: until 1.19,
// not from 1.20. known is false when the version does not say.
func KyvernoEnforcesLegacy(version string) (enforces, known bool) {
	minor, ok := KyvernoMinor(version)
	if !ok {
		return false, false
	}
	return minor < LegacyExecutionRemoved, true
}

// IsKyvernoLegacyRefusal says whether an admission denial's message is Kyverno 1.20's refusal of a
// legacy-kind write ("... execution was removed in v1.20; the API remains available ..."; the
// exact wording may change, so any refusal naming the removal in 1.2x or the legacy policy APIs is
// taken). The caller checks that the denied write was of a legacy kind.
func IsKyvernoLegacyRefusal(message string) bool {
	m := strings.ToLower(message)
	if !strings.Contains(m, "denied") && !strings.Contains(m, "forbidden") {
		return false
	}
	// Kyverno 1.19's deprecation warning says the kinds "will be removed in v1.20": quoted in
	// another denial, it is no refusal of the kind.
	m = strings.ReplaceAll(m, "will be removed in", "")
	return strings.Contains(m, "removed in v1.2") || strings.Contains(m, "removed in 1.2") ||
		strings.Contains(m, "legacy policy api")
}

// KyvernoExceptionBypass says what a Kyverno of version lets through its exception settings, ""
// when nothing known: Kyverno 1.19.0 honoured policies.kyverno.io PolicyExceptions created as v1
// or v1beta1 in any namespace, whatever --exceptionNamespace said (kyverno#17367, fixed in
// 1.19.1), so anyone able to create one anywhere in the cluster exempts resources from every
// policy there.
func KyvernoExceptionBypass(version string) string {
	v := strings.TrimPrefix(version, "v")
	if v != "1.19.0" && !strings.HasPrefix(v, "1.19.0-") && !strings.HasPrefix(v, "1.19.0+") {
		return ""
	}
	return "Kyverno 1.19.0 honours policies.kyverno.io PolicyExceptions outside --exceptionNamespace (kyverno#17367): anyone who can create one in any namespace exempts resources from every policy; upgrade to 1.19.1 or later"
}
