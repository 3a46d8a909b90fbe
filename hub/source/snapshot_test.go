package source

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A snapshot is read only when it holds what the set's status pins: its members are hashed again
// on every read. Whoever may write the hub's namespace could replace one (deleted and created
// again, immutable or not) with other members that are valid policies all the same: refused.
func TestSnapshotIsHashedAgainOnRead(t *testing.T) {
	set := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "pss", UID: "uid-1"}}
	inline, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "one", nil), template("Policy", "shop", "two", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Inline([]policyhubv1.PolicyTemplate{template("ClusterPolicy", "", "one", map[string]string{"team": "platform"}), template("Policy", "shop", "two", nil)}, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	// An OCI version: its digest is the manifest's, not a hash of the members.
	oci := &Artifact{Digest: "sha256:" + strings.Repeat("ab", 32), Policies: inline.Policies}
	ociMembers, err := MembersDigest(oci.Policies)
	if err != nil {
		t.Fatal(err)
	}
	if ociMembers != inline.Digest {
		t.Fatalf("members digest %s, want the sealed digest %s (the same members)", ociMembers, inline.Digest)
	}

	snapshot := func(art *Artifact) map[string][]byte {
		cm, err := NewSnapshot("policyhub-system", set, art)
		if err != nil {
			t.Fatal(err)
		}
		return cm.BinaryData
	}
	for _, tc := range []struct {
		name string
		art  *Artifact // the version written
		data *Artifact // whose members the snapshot holds instead, when set
		pin  Pin
		want string // "" read
	}{
		{name: "a sealed version, pinned", art: inline, pin: Pin{Digest: inline.Digest, Members: inline.Digest}},
		{name: "a sealed version, pinned by a status written before members digests", art: inline, pin: Pin{Digest: inline.Digest}},
		{name: "an OCI version, pinned", art: oci, pin: Pin{Digest: oci.Digest, Members: ociMembers}},
		{name: "a stable version, pinned by its revision", art: oci, pin: Pin{Revision: Revision(oci.Digest), Members: ociMembers}},
		{name: "a sealed version's members replaced", art: inline, data: other, pin: Pin{Digest: inline.Digest, Members: inline.Digest}, want: "its members hash to " + other.Digest},
		{name: "a sealed version's members replaced, before members digests", art: inline, data: other, pin: Pin{Digest: inline.Digest}, want: "its members hash to " + other.Digest},
		{name: "an OCI version's members replaced", art: oci, data: other, pin: Pin{Digest: oci.Digest, Members: ociMembers}, want: "the set's status pins " + ociMembers},
		{name: "an OCI version before members digests", art: oci, pin: Pin{Digest: oci.Digest}, want: "the set's status pins " + oci.Digest},
		{name: "another version", art: other, pin: Pin{Digest: inline.Digest, Members: inline.Digest}, want: "holds version " + other.Digest},
		{name: "another stable version", art: other, pin: Pin{Revision: Revision(inline.Digest)}, want: "holds version " + other.Digest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm, err := NewSnapshot("policyhub-system", set, tc.art)
			if err != nil {
				t.Fatal(err)
			}
			if tc.data != nil {
				cm.BinaryData = snapshot(tc.data)
			}
			art, err := ReadSnapshot(cm, DefaultLimits, tc.pin)
			if tc.want == "" {
				if err != nil || art.Digest != tc.art.Digest || len(art.Policies) != len(tc.art.Policies) {
					t.Fatalf("read %v, %v: want version %s", art, err, tc.art.Digest)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrSnapshotRefused) {
				t.Fatalf("read %v, %v: want it refused saying %q", art, err, tc.want)
			}
			if art != nil {
				t.Errorf("returned %v with the error", art)
			}
		})
	}
}
