package source

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
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

// ReadSnapshot reads a snapshot's members back, checked again as they were when read from the
// source: a ConfigMap on the hub is writable by whoever may write the hub's namespace.
func ReadSnapshot(cm *corev1.ConfigMap, limits Limits) (*Artifact, error) {
	digest := cm.Annotations[annotationDigest]
	raw, ok := cm.BinaryData[policyhubv1.SnapshotKey]
	if !ok || digest == "" {
		return nil, fmt.Errorf("snapshot %s/%s holds no members (binaryData %s and annotation %s)", cm.Namespace, cm.Name, policyhubv1.SnapshotKey, annotationDigest)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, limits.MaxTotalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if int64(len(data)) > limits.MaxTotalBytes {
		return nil, fmt.Errorf("snapshot %s/%s: members over %d bytes", cm.Namespace, cm.Name, limits.MaxTotalBytes)
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
