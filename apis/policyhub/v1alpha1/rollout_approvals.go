package v1alpha1

import (
	"slices"
	"strings"
)

// The policyhub.io/rollout-approved annotation (AnnotationRolloutApproved) is written by people
// and by `kubectl policyhub rollout approve`, and read by the hub: both go through these
// functions, so they agree on what an entry is. An entry is "wave@revision"; entries are
// separated by commas, whitespace around an entry or its parts is tolerated, and an entry that
// is not wave@revision is ignored (a typo approves nothing, it does not break the rollout).

// RolloutApproval is one entry of the annotation: wave approved for revision.
// +kubebuilder:object:generate=false
type RolloutApproval struct {
	Wave     string
	Revision string
}

// String is the entry as written in the annotation: wave@revision.
func (a RolloutApproval) String() string { return a.Wave + "@" + a.Revision }

// valid: both parts present, and neither holds a separator or whitespace (it would not read back).
func (a RolloutApproval) valid() bool {
	return approvalPartValid(a.Wave) && approvalPartValid(a.Revision)
}

func approvalPartValid(s string) bool {
	return s != "" && !strings.ContainsAny(s, "@, \t\r\n")
}

// ParseRolloutApprovals reads the annotation's value: its well-formed entries in the order
// written, duplicates included. A wave may appear with several revisions (only the one being
// rolled out counts: see RolloutApproved).
func ParseRolloutApprovals(value string) []RolloutApproval {
	var approvals []RolloutApproval
	for entry := range strings.SplitSeq(value, ",") {
		wave, revision, ok := strings.Cut(entry, "@")
		if !ok {
			continue
		}
		a := RolloutApproval{Wave: strings.TrimSpace(wave), Revision: strings.TrimSpace(revision)}
		if a.valid() {
			approvals = append(approvals, a)
		}
	}
	return approvals
}

// FormatRolloutApprovals writes approvals as the annotation's value: entries sorted by wave then
// revision, without duplicates, joined by commas; entries that would not read back (an empty
// part, or one holding '@', ',' or whitespace) are left out. "" when none is left.
func FormatRolloutApprovals(approvals []RolloutApproval) string {
	entries := make([]string, 0, len(approvals))
	sorted := slices.Clone(approvals)
	slices.SortFunc(sorted, func(a, b RolloutApproval) int {
		if c := strings.Compare(a.Wave, b.Wave); c != 0 {
			return c
		}
		return strings.Compare(a.Revision, b.Revision)
	})
	for _, a := range slices.Compact(sorted) {
		if a.valid() {
			entries = append(entries, a.String())
		}
	}
	return strings.Join(entries, ",")
}

// RolloutApproved reports whether annotations (a FleetPolicy's) approve wave for revision.
func RolloutApproved(annotations map[string]string, wave, revision string) bool {
	want := RolloutApproval{Wave: wave, Revision: revision}
	return want.valid() && slices.Contains(ParseRolloutApprovals(annotations[AnnotationRolloutApproved]), want)
}
