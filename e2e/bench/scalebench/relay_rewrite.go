package main

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// syncLeasesPath is the collection of the sync Lease every writer of a cluster takes
// (hub/work.WithLock, through client-go's resourcelock.LeaseLock: GET, POST, PUT on it).
const syncLeasesPath = "/apis/coordination.k8s.io/v1/namespaces/" + policyhubv1.SyncLeaseNamespace + "/leases"

// syncLeasePath is the sync Lease itself.
const syncLeasePath = syncLeasesPath + "/" + policyhubv1.SyncLeaseName

// maxLeaseBody bounds a Lease body the relay reads to rename it: a Lease is a few hundred bytes.
const maxLeaseBody = 1 << 20

// ownSyncLease is the sync Lease the relay gives cluster name, in the apiserver the name shares
// with others: the product's name plus the cluster's.
func ownSyncLease(name string) (string, error) {
	lease := policyhubv1.SyncLeaseName + "-" + name
	if errs := validation.IsDNS1123Subdomain(lease); len(errs) > 0 {
		return "", fmt.Errorf("cluster name %q makes no valid Lease name: %v", name, errs)
	}
	return lease, nil
}

// leaseRoute says what the relay does with one request of a cluster name to its apiserver.
type leaseRoute struct {
	// path is the path to send on: the request's, or the name's own sync Lease's.
	path string
	// renameBody: the body (a Lease the hub writes) and the response (the Lease written, or
	// read) name the sync Lease, renamed on the way in and back on the way out.
	renameBody bool
}

// routeLeaseRequest routes a request of the cluster whose own sync Lease is own: a request of
// the sync Lease goes to own, a create in the sync Lease's collection may carry the sync Lease
// in its body (renameLease decides); every other request goes as it came. A list or watch of
// the collection is not rewritten: it shows every name's Lease (the hub makes none).
func routeLeaseRequest(method, path, own string) leaseRoute {
	switch {
	case path == syncLeasePath:
		return leaseRoute{path: syncLeasesPath + "/" + own, renameBody: true}
	case path == syncLeasesPath && method == http.MethodPost:
		return leaseRoute{path: path, renameBody: true}
	}
	return leaseRoute{path: path}
}

// leaseCodecs decode and encode Leases in the media types the hub's clients send and accept:
// client-go's generated clients send built-in kinds as protobuf, kubectl as JSON.
var leaseCodecs = serializer.NewCodecFactory(leaseScheme())

func leaseScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// renameLease renames a Lease named from to to, in a body of the given content type (JSON or
// protobuf), and reports whether it did. Any other body (another Lease, a Status, a patch, a
// media type it does not know) is returned as it came; a body of its media types that does not
// decode is an error.
func renameLease(body []byte, contentType, from, to string) ([]byte, bool, error) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mediaType != runtime.ContentTypeJSON && mediaType != runtime.ContentTypeProtobuf) || len(bytes.TrimSpace(body)) == 0 {
		return body, false, nil // a media type not ours passes as it came
	}
	info, ok := runtime.SerializerInfoForMediaType(leaseCodecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return body, false, nil
	}
	obj, _, err := info.Serializer.Decode(body, nil, nil)
	if err != nil {
		// A body that is not a kind of this scheme (another object in the collection) passes.
		if runtime.IsNotRegisteredError(err) {
			return body, false, nil
		}
		return nil, false, fmt.Errorf("read the %s body: %w", mediaType, err)
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name != from {
		return body, false, nil
	}
	lease.Name = to
	lease.TypeMeta = metav1.TypeMeta{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease"}
	var out bytes.Buffer
	if err := info.Serializer.Encode(lease, &out); err != nil {
		return nil, false, fmt.Errorf("write the %s body: %w", mediaType, err)
	}
	return out.Bytes(), true, nil
}
