package work

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// groupMapper is a cluster's RESTMapper that asks the cluster's discovery about one API group
// at a time, only the groups something asks for (the Kyverno groups policyhub writes and
// reads), and keeps only those.
//
// controller-runtime's default mapper downloads the cluster's whole aggregated discovery
// document and keeps every kind of every group, and downloads it again for each group the
// cluster does not serve (a cluster without Kyverno's CEL kinds: every pass). At a thousand
// clusters that was a quarter of the hub's memory and of its CPU while converging (bench-scale
// heap and CPU profiles, docs/benchmarks.md). The mapping itself is client-go's
// (restmapper.NewDiscoveryRESTMapper) over the groups fetched here.
type groupMapper struct {
	discovery discovery.DiscoveryInterface
	// recheck is how long an answer about a group is trusted before a kind or version it lacks
	// makes the mapper ask again (Kyverno installed or upgraded in the cluster meanwhile).
	recheck time.Duration

	mu     sync.Mutex
	groups map[string]*groupEntry
	mapper meta.RESTMapper
}

type groupEntry struct {
	// resources is nil when the cluster does not serve the group.
	resources *restmapper.APIGroupResources
	fetched   time.Time
}

func newGroupMapper(d discovery.DiscoveryInterface, recheck time.Duration) *groupMapper {
	return &groupMapper{discovery: d, recheck: recheck, groups: map[string]*groupEntry{}, mapper: restmapper.NewDiscoveryRESTMapper(nil)}
}

// load makes sure the group is known, asking the cluster when it never was or when refresh
// is set and the last answer is older than recheck. It returns the mapper to use.
func (m *groupMapper) load(group string, refresh bool) (meta.RESTMapper, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.groups[group]; ok && (!refresh || time.Since(e.fetched) < m.recheck) {
		return m.mapper, nil
	}
	resources, err := m.fetch(group)
	if err != nil {
		return nil, err
	}
	m.groups[group] = &groupEntry{resources: resources, fetched: time.Now()}
	var all []*restmapper.APIGroupResources
	for _, e := range m.groups {
		if e.resources != nil {
			all = append(all, e.resources)
		}
	}
	m.mapper = restmapper.NewDiscoveryRESTMapper(all)
	return m.mapper, nil
}

// fetch reads one group's versions and each version's resources; nil when it is not served.
func (m *groupMapper) fetch(group string) (*restmapper.APIGroupResources, error) {
	var apiGroup metav1.APIGroup
	if group == "" {
		apiGroup.Versions = []metav1.GroupVersionForDiscovery{{GroupVersion: "v1", Version: "v1"}}
		apiGroup.PreferredVersion = apiGroup.Versions[0]
	} else {
		raw, err := m.discovery.RESTClient().Get().AbsPath("/apis", group).Do(context.Background()).Raw()
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("discover API group %q: %w", group, err)
		}
		if err := json.Unmarshal(raw, &apiGroup); err != nil {
			return nil, fmt.Errorf("discover API group %q: %w", group, err)
		}
	}
	out := &restmapper.APIGroupResources{Group: apiGroup, VersionedResources: map[string][]metav1.APIResource{}}
	for _, v := range apiGroup.Versions {
		list, err := m.discovery.ServerResourcesForGroupVersion(v.GroupVersion)
		if apierrors.IsNotFound(err) {
			continue // listed but not served (yet): as if absent
		}
		if err != nil {
			return nil, fmt.Errorf("discover the resources of %s: %w", v.GroupVersion, err)
		}
		out.VersionedResources[v.Version] = list.APIResources
	}
	return out, nil
}

// refresh asks the cluster about group again now, however recent the last answer: for a group
// whose kinds appear as the cluster's own controllers make them (Gatekeeper's Constraints).
func (m *groupMapper) refresh(group string) error {
	m.mu.Lock()
	if e, ok := m.groups[group]; ok {
		e.fetched = time.Time{}
	}
	m.mu.Unlock()
	_, err := m.load(group, true)
	return err
}

// Kinds are the kinds the cluster serves in group (none when it does not serve it), without
// subresources; asked again when the last answer is older than recheck.
func (m *groupMapper) Kinds(group string) ([]schema.GroupKind, error) {
	if _, err := m.load(group, true); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.groups[group]
	if e == nil || e.resources == nil {
		return nil, nil
	}
	seen := map[schema.GroupKind]bool{}
	var out []schema.GroupKind
	for _, resources := range e.resources.VersionedResources {
		for _, r := range resources {
			gk := schema.GroupKind{Group: group, Kind: r.Kind}
			if strings.Contains(r.Name, "/") || seen[gk] {
				continue
			}
			seen[gk] = true
			out = append(out, gk)
		}
	}
	return out, nil
}

// mapWithRecheck runs a mapping of group's kinds; a kind or version the group's last answer lacks is
// asked about again once that answer is older than recheck.
func mapWithRecheck[T any](m *groupMapper, group string, mapping func(meta.RESTMapper) (T, error)) (T, error) {
	mapper, err := m.load(group, false)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := mapping(mapper)
	if !meta.IsNoMatchError(err) {
		return out, err
	}
	if mapper, err = m.load(group, true); err != nil {
		var zero T
		return zero, err
	}
	return mapping(mapper)
}

func (m *groupMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return mapWithRecheck(m, r.Group, func(mm meta.RESTMapper) (schema.GroupVersionKind, error) { return mm.KindFor(r) })
}

func (m *groupMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return mapWithRecheck(m, r.Group, func(mm meta.RESTMapper) ([]schema.GroupVersionKind, error) { return mm.KindsFor(r) })
}

func (m *groupMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return mapWithRecheck(m, r.Group, func(mm meta.RESTMapper) (schema.GroupVersionResource, error) { return mm.ResourceFor(r) })
}

func (m *groupMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return mapWithRecheck(m, r.Group, func(mm meta.RESTMapper) ([]schema.GroupVersionResource, error) { return mm.ResourcesFor(r) })
}

func (m *groupMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return mapWithRecheck(m, gk.Group, func(mm meta.RESTMapper) (*meta.RESTMapping, error) { return mm.RESTMapping(gk, versions...) })
}

func (m *groupMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return mapWithRecheck(m, gk.Group, func(mm meta.RESTMapper) ([]*meta.RESTMapping, error) { return mm.RESTMappings(gk, versions...) })
}

func (m *groupMapper) ResourceSingularizer(resource string) (string, error) {
	m.mu.Lock()
	mm := m.mapper
	m.mu.Unlock()
	return mm.ResourceSingularizer(resource)
}
