package tocel

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// gvr is a kind's group, version and resource as an admission resourceRule names them.
type gvr struct{ group, version, resource string }

// kinds is the table of kinds the converter knows; a kind outside it is refused rather than
// guessed (a wrong plural would match nothing, silently).
var kinds = map[string]gvr{
	"Pod":                      {"", "v1", "pods"},
	"Service":                  {"", "v1", "services"},
	"ConfigMap":                {"", "v1", "configmaps"},
	"Secret":                   {"", "v1", "secrets"},
	"Namespace":                {"", "v1", "namespaces"},
	"ServiceAccount":           {"", "v1", "serviceaccounts"},
	"PersistentVolume":         {"", "v1", "persistentvolumes"},
	"PersistentVolumeClaim":    {"", "v1", "persistentvolumeclaims"},
	"ReplicationController":    {"", "v1", "replicationcontrollers"},
	"Node":                     {"", "v1", "nodes"},
	"Endpoints":                {"", "v1", "endpoints"},
	"LimitRange":               {"", "v1", "limitranges"},
	"ResourceQuota":            {"", "v1", "resourcequotas"},
	"Deployment":               {"apps", "v1", "deployments"},
	"StatefulSet":              {"apps", "v1", "statefulsets"},
	"DaemonSet":                {"apps", "v1", "daemonsets"},
	"ReplicaSet":               {"apps", "v1", "replicasets"},
	"Job":                      {"batch", "v1", "jobs"},
	"CronJob":                  {"batch", "v1", "cronjobs"},
	"Ingress":                  {"networking.k8s.io", "v1", "ingresses"},
	"IngressClass":             {"networking.k8s.io", "v1", "ingressclasses"},
	"NetworkPolicy":            {"networking.k8s.io", "v1", "networkpolicies"},
	"Role":                     {"rbac.authorization.k8s.io", "v1", "roles"},
	"ClusterRole":              {"rbac.authorization.k8s.io", "v1", "clusterroles"},
	"RoleBinding":              {"rbac.authorization.k8s.io", "v1", "rolebindings"},
	"ClusterRoleBinding":       {"rbac.authorization.k8s.io", "v1", "clusterrolebindings"},
	"PodDisruptionBudget":      {"policy", "v1", "poddisruptionbudgets"},
	"StorageClass":             {"storage.k8s.io", "v1", "storageclasses"},
	"PriorityClass":            {"scheduling.k8s.io", "v1", "priorityclasses"},
	"CustomResourceDefinition": {"apiextensions.k8s.io", "v1", "customresourcedefinitions"},
}

// match is what one rule's match/exclude became.
type match struct {
	rules      []any // matchConstraints.resourceRules (without operations, added later)
	excluded   []any // matchConstraints.excludeResourceRules
	operations []string
	nsSelector map[string]any
	objSelect  map[string]any
	nsExprs    []any // namespaceSelector matchExpressions from namespaces filters
	conditions []any // matchConditions ({name, expression}) from names filters
	podsOnly   bool
	noAutogen  bool // legacy autogen does not apply (names filters)
}

// resourceFilterKeys are the keys of a legacy ResourceDescription the converter reads.
var resourceFilterKeys = map[string]bool{
	"kinds": true, "namespaces": true, "operations": true, "selector": true, "namespaceSelector": true,
	"names": true,
}

// convertMatch converts a rule's match and exclude blocks.
func convertMatch(rule map[string]any) (match, error) {
	var m match
	items, err := filterItems(rule["match"], "match")
	if err != nil {
		return m, err
	}
	if len(items) == 0 {
		return m, refuse("match", "no resources matched")
	}
	if len(items) > 1 {
		for i, it := range items {
			if len(it) != 1 || it["kinds"] == nil {
				return m, refuse(fmt.Sprintf("match.any[%d]", i), "several match entries are converted only when each names kinds alone")
			}
		}
	}
	var ops []string
	for i, it := range items {
		where := fmt.Sprintf("match[%d]", i)
		rules, pods, err := kindRules(where, it["kinds"])
		if err != nil {
			return m, err
		}
		m.rules = append(m.rules, rules...)
		m.podsOnly = pods && (i == 0 || m.podsOnly)
		if o, ok := it["operations"]; ok {
			if ops, err = stringList(where+".operations", o); err != nil {
				return m, err
			}
		}
		if ns, ok := it["namespaces"]; ok {
			expr, err := namespaceExpr(where, it["kinds"], ns, "In")
			if err != nil {
				return m, err
			}
			m.nsExprs = append(m.nsExprs, expr)
		}
		if names, ok := it["names"]; ok {
			expr, err := nameExpr(where, names)
			if err != nil {
				return m, err
			}
			m.conditions = append(m.conditions, map[string]any{"name": "match-names", "expression": expr})
			m.noAutogen = true
		}
		if s, ok := it["selector"].(map[string]any); ok {
			m.objSelect = s
			m.podsOnly = false
		}
		if s, ok := it["namespaceSelector"].(map[string]any); ok {
			m.nsSelector = s
		}
		if _, ok := it["namespaceSelector"]; ok && len(items) > 1 {
			return m, refuse(where, "namespaceSelector with several match entries is not converted")
		}
	}
	m.operations = ops

	ex, err := filterItems(rule["exclude"], "exclude")
	if err != nil {
		return m, err
	}
	for i, it := range ex {
		where := fmt.Sprintf("exclude[%d]", i)
		if _, ok := it["selector"]; ok {
			return m, refuse(where+".selector", "an exclude selector is not converted")
		}
		if _, ok := it["namespaceSelector"]; ok {
			return m, refuse(where+".namespaceSelector", "an exclude namespaceSelector is not converted")
		}
		if _, ok := it["operations"]; ok {
			return m, refuse(where+".operations", "exclude by operation is not converted")
		}
		_, hasKinds := it["kinds"]
		ns, hasNS := it["namespaces"]
		names, hasNames := it["names"]
		if hasNames {
			if hasKinds || hasNS {
				return m, refuse(where+".names", "exclude of names together with kinds or namespaces is not converted")
			}
			expr, err := nameExpr(where, names)
			if err != nil {
				return m, err
			}
			m.conditions = append(m.conditions, map[string]any{"name": fmt.Sprintf("exclude-names-%d", i), "expression": "!(" + expr + ")"})
			m.noAutogen = true
			continue
		}
		switch {
		case hasKinds && hasNS:
			return m, refuse(where, "exclude of kinds within namespaces is not converted")
		case hasKinds:
			rules, _, err := kindRules(where, it["kinds"])
			if err != nil {
				return m, err
			}
			m.excluded = append(m.excluded, rules...)
			m.podsOnly = false
		case hasNS:
			expr, err := namespaceExpr(where, firstKinds(items), ns, "NotIn")
			if err != nil {
				return m, err
			}
			m.nsExprs = append(m.nsExprs, expr)
		default:
			return m, refuse(where, "an exclude entry without kinds or namespaces is not converted")
		}
	}
	return m, nil
}

// filterItems returns the resource descriptions of a match or exclude block, refusing what a
// ValidatingPolicy cannot say: all with several entries, subjects, roles, names, annotations.
func filterItems(block any, where string) ([]map[string]any, error) {
	if block == nil {
		return nil, nil
	}
	b, ok := block.(map[string]any)
	if !ok {
		return nil, refuse(where, "not a map")
	}
	var entries []any
	for _, k := range sortedKeys(b) {
		v := b[k]
		switch k {
		case "any":
			l, _ := v.([]any)
			entries = append(entries, l...)
		case "all":
			l, _ := v.([]any)
			if len(l) > 1 {
				return nil, refuse(where+".all", "several entries under all are not converted")
			}
			entries = append(entries, l...)
		case "resources":
			entries = append(entries, map[string]any{"resources": v})
		default:
			return nil, refuse(where+"."+k, "%s is not converted", k)
		}
	}
	if _, hasAny := b["any"]; hasAny && (b["all"] != nil || b["resources"] != nil) {
		return nil, refuse(where, "any together with all or resources is not converted")
	}
	var out []map[string]any
	for i, e := range entries {
		em, _ := e.(map[string]any)
		for _, k := range sortedKeys(em) {
			if k != "resources" {
				return nil, refuse(fmt.Sprintf("%s[%d].%s", where, i, k), "%s is not converted", k)
			}
		}
		res, _ := em["resources"].(map[string]any)
		for _, k := range sortedKeys(res) {
			if !resourceFilterKeys[k] {
				return nil, refuse(fmt.Sprintf("%s[%d].resources.%s", where, i, k), "%s is not converted", k)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// kindRules maps kinds to resourceRules, one per group; pods reports a match of Pod alone.
func kindRules(where string, v any) ([]any, bool, error) {
	names, err := stringList(where+".kinds", v)
	if err != nil {
		return nil, false, err
	}
	if len(names) == 0 {
		return nil, false, refuse(where, "no kinds")
	}
	byGroup := map[[2]string][]string{}
	for _, k := range names {
		if strings.ContainsAny(k, "/*?") {
			return nil, false, refuse(where+".kinds", "kind %q (group/version, subresource or wildcard form) is not converted", k)
		}
		r, ok := kinds[k]
		if !ok {
			return nil, false, refuse(where+".kinds", "kind %q is not in the converter's kind table", k)
		}
		key := [2]string{r.group, r.version}
		byGroup[key] = append(byGroup[key], r.resource)
	}
	keys := make([][2]string, 0, len(byGroup))
	for k := range byGroup {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	var rules []any
	for _, k := range keys {
		res := byGroup[k]
		sort.Strings(res)
		rules = append(rules, map[string]any{
			"apiGroups": []any{k[0]}, "apiVersions": []any{k[1]}, "resources": toAny(res),
		})
	}
	return rules, reflect.DeepEqual(names, []string{"Pod"}), nil
}

// clusterScoped are the table's kinds without a namespace: a legacy namespaces filter never
// matches them, while a namespaceSelector would not filter them at all, so it is refused.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ClusterRole": true,
	"ClusterRoleBinding": true, "StorageClass": true, "PriorityClass": true,
	"CustomResourceDefinition": true, "IngressClass": true,
}

// namespaceExpr turns a legacy namespaces list into a namespaceSelector expression on the
// kubernetes.io/metadata.name label, which the API server sets on every namespace.
func namespaceExpr(where string, kindList, ns any, op string) (any, error) {
	list, err := stringList(where+".namespaces", ns)
	if err != nil {
		return nil, err
	}
	for _, n := range list {
		if strings.ContainsAny(n, "*?") {
			return nil, refuse(where+".namespaces", "namespace wildcard %q is not converted", n)
		}
	}
	kl, _ := kindList.([]any)
	for _, k := range kl {
		if s, _ := k.(string); clusterScoped[s] {
			return nil, refuse(where+".namespaces", "namespaces with the cluster-scoped kind %s are not converted", s)
		}
	}
	return map[string]any{"key": "kubernetes.io/metadata.name", "operator": op, "values": toAny(list)}, nil
}

// nameExpr turns a legacy names list (wildcards allowed) into CEL on the resource's name: the
// new object's, or the old one's on DELETE, as Kyverno matches it. Kyverno's autogen does not
// apply to rules filtered by name, so the policy turns autogen off.
func nameExpr(where string, names any) (string, error) {
	list, err := stringList(where+".names", names)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", refuse(where+".names", "an empty names list is not converted")
	}
	const name = "(object != null ? object : oldObject).metadata.name"
	var alts []string
	for _, n := range list {
		alts = append(alts, wildcardCEL(name, n))
	}
	return "has((object != null ? object : oldObject).metadata.name) && (" + strings.Join(alts, " || ") + ")", nil
}

func firstKinds(items []map[string]any) any {
	var all []any
	for _, it := range items {
		l, _ := it["kinds"].([]any)
		all = append(all, l...)
	}
	return all
}

func stringList(where string, v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, refuse(where, "expected a list of strings")
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, refuse(where, "expected a list of strings, found %v", e)
		}
		out = append(out, s)
	}
	return out, nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
