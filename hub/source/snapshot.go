package source

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A snapshot is one version of a PolicySet's members kept on the hub: a ConfigMap in the hub's
// namespace, immutable, owned by the set, its members gzip-compressed JSON. The hub renders from
// it, never from the source, and keeps it while the source cannot be read: the clusters keep the
// last good version and a restarted hub has it too.
//
// A ConfigMap in the hub's namespace is writable by whoever may write that namespace, so a
// snapshot is trusted no further than the set's status pins it: its annotation names the
// version's digest, the status records that digest and the sha256 of the members' JSON
// (status.source.membersDigest, status.rollout.stable.membersDigest), and every read inflates
// the members (bounded), hashes them again and refuses a snapshot whose hash is not the one
// pinned.

// MaxSnapshotBytes bounds a snapshot's compressed members, well inside the 1 MiB a ConfigMap
// may hold: a library of a few hundred policies compresses to a tenth of that.
const MaxSnapshotBytes = 900 << 10

// annotationDigest, on a snapshot, is the digest of the version it holds.
const annotationDigest = "policyhub.io/source-digest"

// SnapshotName names the snapshot of a set's version: the set's name and its Revision.
func SnapshotName(set, digest string) string {
	return "policyset-" + set[:min(len(set), 225)] + "-" + Revision(digest)
}

// Revision names a version of a set in short, as its rollout and approvals do: the digest's
// first 12 hex digits.
func Revision(digest string) string {
	hexDigits := digest[strings.LastIndex(digest, ":")+1:]
	return hexDigits[:min(len(hexDigits), 12)]
}

// NewSnapshot is the snapshot of art for the set, in namespace.
func NewSnapshot(namespace string, set *policyhubv1.PolicySet, art *Artifact) (*corev1.ConfigMap, error) {
	data, err := encodeMembers(art.Policies)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("compress the members: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress the members: %w", err)
	}
	if buf.Len() > MaxSnapshotBytes {
		return nil, fmt.Errorf("the %d members compress to %d bytes, over the %d a snapshot on the hub may hold: split the library into several PolicySets", len(art.Policies), buf.Len(), MaxSnapshotBytes)
	}
	immutable := true
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: SnapshotName(set.Name, art.Digest), Namespace: namespace,
			Labels:      map[string]string{policyhubv1.LabelDeclarationUID: string(set.UID)},
			Annotations: map[string]string{annotationDigest: art.Digest, policyhubv1.AnnotationSource: policyhubv1.KindPolicySet + "/" + set.Name},
		},
		Immutable:  &immutable,
		BinaryData: map[string][]byte{policyhubv1.SnapshotKey: buf.Bytes()},
	}
	return cm, nil
}

// ErrSnapshotRefused marks a snapshot the hub does not read: not the set's, or not holding what
// the set's status pins.
var ErrSnapshotRefused = errors.New("snapshot refused")

// Pin is what a set's status records of a version, which the version's snapshot must hold.
type Pin struct {
	// Digest is the version's (status.source.digest); "" where only Revision is recorded.
	Digest string
	// Revision is the digest's short form (status.rollout.stable.revision); "": not checked.
	Revision string
	// Members is the sha256 of the members' JSON (MembersDigest); "" in a status written before
	// the hub recorded it, where the digest stands in for it: a digest the hub sealed (Flux,
	// ConfigMaps, inline) is that hash, an OCI manifest's is not, and such a snapshot is refused
	// until the source is read again.
	Members string
}

// MembersDigest is the sha256 of the members' JSON as a snapshot holds them ("sha256:…"): for
// the sources the hub seals (Flux, ConfigMaps, inline) it is the version's digest itself.
func MembersDigest(policies []*unstructured.Unstructured) (string, error) {
	data, err := encodeMembers(policies)
	if err != nil {
		return "", err
	}
	return sha256Digest(data), nil
}

func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ReadSnapshot reads a snapshot's members back if they are what pin says (see Pin), checked
// again as they were when read from the source: a ConfigMap on the hub is writable by whoever
// may write the hub's namespace. A snapshot that is not what the pin says is an error wrapping
// ErrSnapshotRefused.
func ReadSnapshot(cm *corev1.ConfigMap, limits Limits, pin Pin) (*Artifact, error) {
	digest := cm.Annotations[annotationDigest]
	raw, ok := cm.BinaryData[policyhubv1.SnapshotKey]
	if !ok || digest == "" {
		return nil, fmt.Errorf("snapshot %s/%s holds no members (binaryData %s and annotation %s): %w", cm.Namespace, cm.Name, policyhubv1.SnapshotKey, annotationDigest, ErrSnapshotRefused)
	}
	if (pin.Digest != "" && digest != pin.Digest) || (pin.Revision != "" && Revision(digest) != pin.Revision) {
		return nil, fmt.Errorf("snapshot %s/%s holds version %s, not the %s the set's status pins: %w", cm.Namespace, cm.Name, digest, pin.Digest+pin.Revision, ErrSnapshotRefused)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s/%s: %w: %w", cm.Namespace, cm.Name, err, ErrSnapshotRefused)
	}
	data, err := io.ReadAll(io.LimitReader(zr, limits.MaxTotalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s/%s: %w: %w", cm.Namespace, cm.Name, err, ErrSnapshotRefused)
	}
	if int64(len(data)) > limits.MaxTotalBytes {
		return nil, fmt.Errorf("snapshot %s/%s: members over %d bytes: %w", cm.Namespace, cm.Name, limits.MaxTotalBytes, ErrSnapshotRefused)
	}
	want := pin.Members
	if want == "" {
		want = digest
	}
	if got := sha256Digest(data); got != want {
		return nil, fmt.Errorf("snapshot %s/%s: its members hash to %s, the set's status pins %s: changed since the hub wrote it, not read: %w", cm.Namespace, cm.Name, got, want, ErrSnapshotRefused)
	}
	var objs []map[string]any
	if err := json.Unmarshal(data, &objs); err != nil {
		return nil, fmt.Errorf("snapshot %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if len(objs) > limits.MaxPolicies {
		return nil, fmt.Errorf("snapshot %s/%s: %d members, over %d", cm.Namespace, cm.Name, len(objs), limits.MaxPolicies)
	}
	art := &Artifact{Digest: digest}
	for i, obj := range objs {
		p, err := member(&unstructured.Unstructured{Object: obj})
		if err != nil {
			return nil, fmt.Errorf("snapshot %s/%s member %d: %w", cm.Namespace, cm.Name, i, err)
		}
		art.Policies = append(art.Policies, p)
	}
	return art, nil
}
