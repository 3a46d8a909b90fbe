package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

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
// in its body (renameObject decides); every other request goes as it came. A list or watch of
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

// renameObject renames a JSON object whose metadata.name is from to to, every other byte of it
// kept but for the object's key order and spacing. It reports whether it renamed: a body that is
// not a JSON object (a patch of another type, a Status), or names another object, is returned
// as it is.
func renameObject(body []byte, from, to string) ([]byte, bool, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body, false, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, false, fmt.Errorf("read the Lease body: %w", err)
	}
	rawMeta, ok := obj["metadata"]
	if !ok {
		return body, false, nil
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(rawMeta, &meta); err != nil {
		// metadata that is not an object: the apiserver refuses it; it is passed on for it to say so.
		return body, false, nil
	}
	var name string
	if raw, ok := meta["name"]; !ok || json.Unmarshal(raw, &name) != nil || name != from {
		return body, false, nil
	}
	var err error
	if meta["name"], err = json.Marshal(to); err != nil {
		return nil, false, err
	}
	if obj["metadata"], err = json.Marshal(meta); err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}
