package pages

import (
	"net/url"
	"strconv"
	"strings"
)

// The pages' addresses: each view is a URL that can be shared.

// FleetURL is the fleet grid, with its query.
func FleetURL(q FleetQuery) string {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("selector", q.Selector)
	set("engine", q.Engine)
	set("kind", q.Kind)
	set("severity", q.Severity)
	set("category", q.Category)
	if q.RowPage > 0 {
		v.Set("page", strconv.Itoa(q.RowPage+1))
	}
	if q.ColPage > 0 {
		v.Set("cpage", strconv.Itoa(q.ColPage+1))
	}
	if len(v) == 0 {
		return "/fleet"
	}
	return "/fleet?" + v.Encode()
}

// ClusterURL is a cluster's page.
func ClusterURL(cluster string) string { return "/clusters/" + url.PathEscape(cluster) }

// DeclarationURL is a declaration's page: FleetPolicies and PolicySets by name, an
// ApplicationPolicy by namespace and name.
func DeclarationURL(kind, namespace, name string) string {
	p := "/policies/" + strings.ToLower(kind) + "/"
	if namespace != "" {
		p += url.PathEscape(namespace) + "/"
	}
	return p + url.PathEscape(name)
}

// ApplicationURL is an application's page.
func ApplicationURL(namespace, name string) string {
	return "/applications/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// policyKey names a Kyverno policy in a cluster: its kind, namespace and name (two policies of
// different kinds may share a name).
type policyKey struct{ kind, namespace, name string }
