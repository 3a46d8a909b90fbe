package shard

import (
	"strings"
	"testing"
)

// A replica's name makes its Lease's name and is a label's value (of the clusters pinned to it
// and the summaries it works): a name that cannot be both is refused at start.
func TestReplicaValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"policyhub-hub-7c9d8-x2x4q", true},
		{"", false},
		{"Upper", false},
		{"a/b", false},
		{strings.Repeat("r", 64), false}, // a valid Lease name part, too long for a label value
		{"r." + strings.Repeat("x", 60), true},
	} {
		err := Replica{HubID: "hub", Name: tc.name}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
