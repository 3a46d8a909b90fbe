package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// shape is one way of writing: the i-th write of a run is writeFor(i), sent with client to
// namespace(i % namespaces). Each write changes its object (a count, a hash or a time moves):
// an unchanged patch would cost the apiserver less and store nothing.
type shape struct {
	letter, name string
	client       rest.Interface
	writeFor     func(i int) (write, error)
	// objectPath is what is read after the run to tell the stored object's size.
	objectPath func(ns string) string
}

// at is the time the i-th write of a run is stamped with: a millisecond after the previous one.
func (b *bench) at(i int) time.Time { return b.start.Add(time.Duration(i+1) * time.Millisecond) }

func (b *bench) shapes() []shape {
	o := b.o
	ns := func(i int) string { return namespace(i % o.namespaces) }
	full := func(i int) (apply, patch []byte, err error) {
		return agentBodies(ns(i), fullSpec(o.policies, o.violations, i+1, b.at(i)), b.at(i))
	}
	group := policyhubv1.GroupVersion.Group
	summary := func(ns string) string { return summaryPath(group, ns) }
	return []shape{
		{letter: "a", name: "agent's JSON patch of the spec, full summary", client: b.hub, objectPath: summary,
			writeFor: func(i int) (write, error) {
				_, patch, err := full(i)
				return write{path: summary(ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "b", name: "server-side apply, full summary", client: b.hub, objectPath: summary,
			writeFor: func(i int) (write, error) {
				apply, _, err := full(i)
				return write{path: summary(ns(i)), patchType: types.ApplyPatchType,
					params: map[string]string{"fieldManager": agentParams["fieldManager"], "force": "true"}, body: apply}, err
			}},
		{letter: "c", name: "hub's status merge patch (observedTime, Ready)", client: b.hub, objectPath: summary,
			writeFor: func(i int) (write, error) {
				body, err := statusPatch(int64(i+2), b.at(i), o.policies, int64(o.policies*4))
				return write{path: summary(ns(i)), subresource: "status", patchType: types.MergePatchType, body: body}, err
			}},
		{letter: "d", name: "fail-only summary (fail, error, blocked), JSON patch", client: b.hub, objectPath: summary,
			writeFor: func(i int) (write, error) {
				_, patch, err := agentBodies(ns(i), failOnlySpec(o.policies, i+1), b.at(i))
				return write{path: summary(ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "e", name: "full summary, JSON patch, CRD copy without CEL rules", client: b.hub,
			objectPath: func(ns string) string { return summaryPath(benchGroup, ns) },
			writeFor: func(i int) (write, error) {
				_, patch, err := full(i)
				return write{path: summaryPath(benchGroup, ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "i", name: "full summary, JSON patch, CRD copy with no schema for spec and status", client: b.hub,
			objectPath: func(ns string) string { return summaryPath(schemalessGroup, ns) },
			writeFor: func(i int) (write, error) {
				_, patch, err := full(i)
				return write{path: summaryPath(schemalessGroup, ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "j", name: "full summary, JSON patch, CRD copy with spec atomic (x-kubernetes-map-type; schema and CEL kept)", client: b.hub,
			objectPath: func(ns string) string { return summaryPath(atomicGroup, ns) },
			writeFor: func(i int) (write, error) {
				_, patch, err := full(i)
				return write{path: summaryPath(atomicGroup, ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "k", name: "fail-only summary, JSON patch, CRD copy with spec atomic (d and j together)", client: b.hub,
			objectPath: func(ns string) string { return summaryPath(atomicGroup, ns) },
			writeFor: func(i int) (write, error) {
				_, patch, err := agentBodies(ns(i), failOnlySpec(o.policies, i+1), b.at(i))
				return write{path: summaryPath(atomicGroup, ns(i)), patchType: types.JSONPatchType, params: agentParams, body: patch}, err
			}},
		{letter: "f", name: "ConfigMap holding the full summary's JSON, JSON patch", client: b.hub, objectPath: configMapPath,
			writeFor: func(i int) (write, error) { return b.configMapWrite(full, ns, i) }},
		{letter: "g", name: "Lease renewTime merge patch", client: b.hub, objectPath: leasePath,
			writeFor: func(i int) (write, error) {
				return write{path: leasePath(ns(i)), patchType: types.MergePatchType, params: agentParams, body: leasePatch(b.at(i))}, nil
			}},
		{letter: "h", name: "f's ConfigMap written through the hub's aggregation layer (gateway → another apiserver)", client: b.viaGateway, objectPath: configMapPath,
			writeFor: func(i int) (write, error) { return b.configMapWrite(full, ns, i) }},
	}
}

// configMapWrite is the i-th write of the full summary's spec into a ConfigMap's one data key.
func (b *bench) configMapWrite(full func(int) ([]byte, []byte, error), ns func(int) string, i int) (write, error) {
	apply, _, err := full(i)
	if err != nil {
		return write{}, err
	}
	spec, err := specJSON(apply)
	if err != nil {
		return write{}, err
	}
	body, err := configMapPatch(spec)
	if err != nil {
		return write{}, fmt.Errorf("ConfigMap patch: %w", err)
	}
	return write{path: configMapPath(ns(i)), patchType: types.JSONPatchType, params: agentParams, body: body}, nil
}
