package v1alpha1

import (
	"slices"
	"testing"
)

func TestParseRolloutApprovals(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []RolloutApproval
	}{
		{"empty", "", nil},
		{"one", "prod@abc123", []RolloutApproval{{"prod", "abc123"}}},
		{"several in order, duplicates kept", "prod@r2,staging@r1,prod@r2", []RolloutApproval{{"prod", "r2"}, {"staging", "r1"}, {"prod", "r2"}}},
		{"whitespace around entries and parts", " staging@r1 ,\n prod @ sha256:ab ", []RolloutApproval{{"staging", "r1"}, {"prod", "sha256:ab"}}},
		{"same wave, two revisions", "prod@r1,prod@r2", []RolloutApproval{{"prod", "r1"}, {"prod", "r2"}}},
		{"malformed entries ignored", "prod,@r1,prod@,a@b@c,pr od@r1,,  ,ok@r1", []RolloutApproval{{"ok", "r1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseRolloutApprovals(tc.value); !slices.Equal(got, tc.want) {
				t.Errorf("ParseRolloutApprovals(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func TestFormatRolloutApprovals(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []RolloutApproval
		want string
	}{
		{"none", nil, ""},
		{"sorted by wave then revision, deduplicated", []RolloutApproval{{"staging", "r2"}, {"prod", "r2"}, {"staging", "r1"}, {"prod", "r2"}}, "prod@r2,staging@r1,staging@r2"},
		{"entries that would not read back are left out", []RolloutApproval{{"", "r1"}, {"prod", ""}, {"a,b", "r1"}, {"prod", "r@1"}, {"pr od", "r1"}, {"ok", "r1"}}, "ok@r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FormatRolloutApprovals(tc.in)
			if got != tc.want {
				t.Errorf("FormatRolloutApprovals(%v) = %q, want %q", tc.in, got, tc.want)
			}
			// What Format writes, Parse reads back as written.
			if back := FormatRolloutApprovals(ParseRolloutApprovals(got)); back != got {
				t.Errorf("round trip of %q: %q", got, back)
			}
		})
	}
}

func TestRolloutApproved(t *testing.T) {
	ann := map[string]string{AnnotationRolloutApproved: " staging@r1, prod@r2 ,broken", "other": "prod@r1"}
	for _, tc := range []struct {
		annotations    map[string]string
		wave, revision string
		want           bool
	}{
		{ann, "staging", "r1", true},
		{ann, "prod", "r2", true},
		{ann, "prod", "r1", false}, // approved for another revision only: never carries over
		{ann, "canary", "r1", false},
		{ann, "", "", false},
		{ann, "broken", "", false},
		{nil, "prod", "r2", false},
		{map[string]string{AnnotationRolloutApproved: ""}, "prod", "r2", false},
	} {
		if got := RolloutApproved(tc.annotations, tc.wave, tc.revision); got != tc.want {
			t.Errorf("RolloutApproved(%v, %q, %q) = %v, want %v", tc.annotations, tc.wave, tc.revision, got, tc.want)
		}
	}
}
