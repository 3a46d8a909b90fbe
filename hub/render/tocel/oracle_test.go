package tocel

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The oracle: legacy policies from kyverno/policies (testdata/kyverno-policies, see its README)
// with the results their own kyverno CLI tests expect. Each policy is converted; every CEL
// expression is compiled and evaluated against every resource its test names, and the verdict
// must equal the legacy expected result. Pod controllers (Deployment, CronJob, ...) are evaluated
// with the expression rewritten as ValidatingPolicy autogen rewrites it, and only when the
// converted policy's autogen covers that controller.
//
// Both lists are asserted: a policy that starts converting, or stops, fails the test until the
// table says so.

var oracle = []struct {
	name    string
	refusal string // empty: must convert; otherwise a substring of a refusal reason
}{
	{name: "require-pod-requests-limits"},
	{name: "require-probes"},
	{name: "disallow-latest-tag"},
	{name: "require-labels"},
	{name: "disallow-privileged-containers"},
	{name: "disallow-host-namespaces"},
	{name: "require-run-as-nonroot"},
	{name: "restrict-node-port"},
	{name: "require-ro-rootfs"},
	{name: "restrict-service-external-ips"},
	{name: "disallow-host-path"},
	{name: "disallow-host-ports"},
	{name: "disallow-privilege-escalation"},
	{name: "disallow-helm-tiller"},
	{name: "disallow-capabilities", refusal: "rule adding-capabilities: validate.deny.conditions.all[0]: condition {{ request.object.spec.[ephemeralContainers, initContainers, containers][]"},
	{name: "check-env-vars"},
	{name: "restrict-jobs", refusal: "rule restrict-job-from-cronjob: preconditions[0]: precondition on {{ request.object.metadata.ownerReferences[0].kind || '' }} is not converted"},
	{name: "prevent-cr8escape", refusal: `pattern "!*+* & !*=*" could match a number's text; not converted`},
	{name: "require-pod-priorityclassname"},
	{name: "restrict-node-affinity"},
	{name: "restrict-ingress-classes"},
	{name: "restrict-loadbalancer"},
	{name: "restrict-storageclass"},
	{name: "imagepullpolicy-always"},
	{name: "require-annotations"},
	{name: "restrict-sa-automount-sa-token"},
	{name: "disallow-localhost-services"},
	{name: "deny-secret-service-account-token-type"},
	{name: "require-deployments-have-multiple-replicas"},
	{name: "disallow-selinux"},
	{name: "restrict-sysctls"},
	{name: "disallow-proc-mount"},
	{name: "restrict-seccomp"},
	{name: "disallow-host-process"},
	{name: "restrict-image-registries"},
	{name: "block-ephemeral-containers"},
	{name: "require-image-checksum"},
	{name: "require-container-port-names"},
	{name: "require-run-as-non-root-user"},
	{name: "forbid-cpu-limits"},
	{name: "restrict-controlplane-scheduling"},
	{name: "disallow-cri-sock-mount"},
	{name: "disallow-all-secrets"},
	{name: "allowed-pod-priorities", refusal: "rule validate-pod-priority: context: context configMap podprioritydict is not converted"},
}

// legacyTest is the part of a kyverno CLI test file the oracle reads.
type legacyTest struct {
	Resources []string `json:"resources"`
	Results   []struct {
		Kind      string   `json:"kind"`
		Policy    string   `json:"policy"`
		Resources []string `json:"resources"`
		Result    string   `json:"result"`
		Rule      string   `json:"rule"`
	} `json:"results"`
}

// autogenKinds maps a controller kind to its ValidatingPolicy autogen name.
var autogenKinds = map[string]string{
	"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
	"ReplicaSet": "replicasets", "Job": "jobs", "CronJob": "cronjobs",
}

func TestOracle(t *testing.T) {
	ev := newEvaluator(t)
	var table []string
	for _, tc := range oracle {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "kyverno-policies", tc.name)
			policy, err := os.ReadFile(filepath.Join(dir, tc.name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := ConvertYAML(policy)
			if err != nil {
				t.Fatalf("convert: %v", err)
			}
			t.Log(res.Report.String())
			if tc.refusal != "" {
				if res.Policy != nil {
					t.Fatalf("converted, want refused with %q", tc.refusal)
				}
				if !strings.Contains(strings.Join(res.Report.Reasons(), "\n"), tc.refusal) {
					t.Fatalf("refused for %q, want a reason containing %q", res.Report.Reasons(), tc.refusal)
				}
				table = append(table, fmt.Sprintf("%-32s refused    %s", tc.name, res.Report.Reasons()[0]))
				return
			}
			if res.Policy == nil {
				t.Fatalf("refused: %q", res.Report.Reasons())
			}
			agree, total, skipped := checkOracle(t, ev, dir, res)
			longest := 0
			for _, v := range res.Policy.Object["spec"].(map[string]any)["validations"].([]any) {
				longest = max(longest, len(v.(map[string]any)["expression"].(string)))
			}
			note := ""
			if skipped > 0 {
				note = fmt.Sprintf(", %d legacy skip read as pass", skipped)
			}
			table = append(table, fmt.Sprintf("%-32s converted  %d/%d resources agree (longest expression %d bytes%s)", tc.name, agree, total, longest, note))
		})
	}
	sort.Strings(table)
	t.Log("oracle:\n" + strings.Join(table, "\n"))
}

// checkOracle evaluates the converted policy against the legacy test's resources.
func checkOracle(t *testing.T, ev *evaluator, dir string, res Result) (agree, total, skipped int) {
	t.Helper()
	var lt legacyTest
	raw, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &lt); err != nil {
		t.Fatal(err)
	}
	// The test names its resource files relative to its own folder; the copies sit beside it.
	resources := map[string]map[string]any{}
	for _, f := range lt.Resources {
		for k, v := range loadResources(t, filepath.Join(dir, filepath.Base(f))) {
			resources[k] = v
		}
	}
	spec := res.Policy.Object["spec"].(map[string]any)
	validations := spec["validations"].([]any)
	matched := map[string]bool{}
	for _, r := range spec["matchConstraints"].(map[string]any)["resourceRules"].([]any) {
		for _, name := range r.(map[string]any)["resources"].([]any) {
			matched[name.(string)] = true
		}
	}
	controllers := map[string]bool{}
	if ag, ok := spec["autogen"].(map[string]any); ok {
		for _, c := range ag["podControllers"].(map[string]any)["controllers"].([]any) {
			controllers[c.(string)] = true
		}
	}
	conditions, _ := spec["matchConditions"].([]any)
	for i, v := range validations {
		if _, err := ev.compile(v.(map[string]any)["expression"].(string)); err != nil {
			t.Errorf("validation %d: %v", i, err)
		}
	}
	for _, r := range lt.Results {
		idx := -1
		for i, rule := range res.Report.Rules {
			if rule.Name == r.Rule {
				idx = i
			}
		}
		if idx < 0 {
			t.Errorf("expected result for rule %q, which the report does not name", r.Rule)
			continue
		}
		expr := validations[idx].(map[string]any)["expression"].(string)
		controller := ""
		if kr, ok := kinds[r.Kind]; ok && matched[kr.resource] {
			// matched as it is
		} else if c, ok := autogenKinds[r.Kind]; ok && controllers[c] {
			controller = c
			expr = autogenRewrite(expr, c)
		} else {
			t.Errorf("%s results expected, but the policy neither matches %s nor covers it by autogen", r.Kind, r.Kind)
			continue
		}
		for _, name := range r.Resources {
			total++
			obj, ok := resources[r.Kind+"/"+name]
			if !ok {
				t.Errorf("%s/%s: not in resource.yaml", r.Kind, name)
				continue
			}
			got := verdict(ev, conditions, expr, obj, controller)
			if got == "pass" && r.Result == "skip" {
				// A ValidatingPolicy has no skip: where Kyverno's pattern skipped
				// (condition anchors), the converted policy does not fail. (A skip by
				// matchConditions is reported as skip by verdict itself.)
				skipped++
				got = "skip"
			}
			if got != r.Result {
				t.Errorf("rule %s, %s/%s: converted says %s, legacy test expects %s", r.Rule, r.Kind, name, got, r.Result)
				continue
			}
			agree++
		}
	}
	return agree, total, skipped
}

// verdict is what the converted policy says of obj: skip when a matchCondition is false, else
// pass or fail by the validation (an error says so). controller, when set, rewrites the
// matchConditions as autogen does.
func verdict(ev *evaluator, conditions []any, expr string, obj map[string]any, controller string) string {
	for _, c := range conditions {
		ce := c.(map[string]any)["expression"].(string)
		if controller != "" {
			ce = autogenRewrite(ce, controller)
		}
		ok, err := ev.eval(ce, obj)
		if err != nil {
			return "error: " + err.Error()
		}
		if !ok {
			return "skip"
		}
	}
	pass, err := ev.eval(expr, obj)
	switch {
	case err != nil:
		return "error: " + err.Error()
	case pass:
		return "pass"
	}
	return "fail"
}

// loadResources reads a multi-document YAML file into kind/name and kind/namespace/name → object.
func loadResources(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		obj, err := decodeYAML(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		kind, _ := obj["kind"].(string)
		ns, _ := meta["namespace"].(string)
		if ns == "" {
			ns = "default" // as the kyverno CLI names a resource without one
		}
		out[kind+"/"+name] = obj
		out[kind+"/"+ns+"/"+name] = obj // tests may name it namespace/name
	}
	return out
}
