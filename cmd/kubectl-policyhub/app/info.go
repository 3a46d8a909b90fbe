package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

func init() { commands = append(commands, newInfoCommand) }

// infoReport is the -o json|yaml output of `info`.
type infoReport struct {
	// Application and Namespace name the application.
	Application string `json:"application"`
	Namespace   string `json:"namespace"`
	// ApplicationPolicies are the names of the namespace's ApplicationPolicies for the application.
	ApplicationPolicies []string `json:"applicationPolicies"`
	// Totals adds up Results.
	Totals reportCounts `json:"totals"`
	// Violations is totals.fail + totals.error.
	Violations int64 `json:"violations"`
	// Blocked counts the application's refused admissions.
	Blocked int64 `json:"blocked"`
	// Results are the application's results per cluster and policy (any policy: fleet-wide or the
	// application's own), as the clusters' agents reported them.
	Results []appResult `json:"results"`
	// TopViolations are the application's most severe and newest violations, from its
	// ApplicationPolicies' status.
	TopViolations []appViolation `json:"topViolations"`
	// BlockedAdmissions are the most recent refused admission per cluster and policy, with
	// Kyverno's message, from its ApplicationPolicies' status.
	BlockedAdmissions []appBlocked `json:"blockedAdmissions"`
	// Exceptions are the active FleetPolicyExceptions that may exempt resources of the
	// namespace (they name it, or match it with a wildcard), the first to end first, at most 10.
	Exceptions []namespaceException `json:"exceptions,omitempty"`
}

// appResult is the application's results of one policy in one cluster.
type appResult struct {
	Cluster string `json:"cluster"`
	// Policy is a cluster-scoped policy's name, or a namespaced one's namespace/name.
	Policy  string       `json:"policy"`
	Results reportCounts `json:"results"`
	Blocked int64        `json:"blocked"`
	// ReportTime is when the hub received the cluster's summary, by the hub's clock.
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// Stale is true when the cluster's agent missed three heartbeats.
	Stale bool `json:"stale"`
}

// appViolation is one failing (or erroring) result of the application's resources.
type appViolation struct {
	Cluster   string       `json:"cluster"`
	Policy    string       `json:"policy"`
	Rule      string       `json:"rule,omitempty"`
	Result    string       `json:"result"`
	Severity  string       `json:"severity,omitempty"`
	Resource  resourceRef  `json:"resource"`
	Message   string       `json:"message,omitempty"`
	Timestamp *metav1.Time `json:"timestamp,omitempty"`
}

// appBlocked is a policy's most recent refusal of one of the application's resources.
type appBlocked struct {
	Cluster  string       `json:"cluster"`
	Policy   string       `json:"policy"`
	Count    int64        `json:"count"`
	Resource *resourceRef `json:"resource,omitempty"`
	Message  string       `json:"message"`
	Time     *metav1.Time `json:"time,omitempty"`
}

func newInfoCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "info APP [-n NAMESPACE]",
		Short: "Show an application's policy results per cluster and policy, and its top violations",
		Long: `Show one application's compliance across the fleet: its results per cluster and policy (every
policy that applies to its resources, fleet-wide or its own), its top violations and its
admissions Kyverno refused, with Kyverno's message.

The application is APP in the namespace (-n, else the kubeconfig context's): the resources
labelled with it (app.oam.dev/name, or an ApplicationPolicy's applicationLabel) in that
namespace. Results come from the clusters' PolicyReportSummaries on the hub; top violations and
refusals from the application's ApplicationPolicies in the namespace.

Exit codes: 0 when the application has no violations, 1 when it has any (fail + error > 0) or
any admission of it was refused (blocked > 0), 2 on errors.

-o json|yaml prints {"application", "namespace", "applicationPolicies", "totals": {"pass",
"fail", "warn", "error", "skip"}, "violations", "blocked", "results": [{"cluster", "policy",
"results", "blocked", "reportTime", "stale"}], "topViolations": [{"cluster", "policy", "rule",
"result", "severity", "resource": {"apiVersion", "kind", "namespace", "name"}, "message",
"timestamp"}], "blockedAdmissions": [{"cluster", "policy", "count", "resource", "message",
"time"}], "exceptions": [{"namespace", "name", "policy", "expiresAt", "inForce", "exempted"}]
(the active FleetPolicyExceptions that name the namespace, when there are any)}.`,
		Example: `  # The shop application of namespace shop
  kubectl policyhub info shop -n shop

  # The same, as YAML
  kubectl policyhub info shop -n shop -o yaml

  # Gate a deployment pipeline on the application's compliance
  kubectl policyhub info shop -n shop >/dev/null || echo "shop has violations"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("info takes one application name, got %d arguments", len(args))}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.applicationNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := o.info(cmd.Context(), args[0], time.Now())
			if err != nil {
				return err
			}
			if err := o.printReport(report, func(w io.Writer) error {
				printInfoTable(w, report, time.Now())
				return nil
			}); err != nil {
				return err
			}
			if len(report.Results) == 0 && len(report.ApplicationPolicies) == 0 && o.output == "table" {
				fmt.Fprintf(o.streams.ErrOut, "No results for application %s in namespace %s: no agent reported resources of it and no ApplicationPolicy declares it.\n", report.Application, report.Namespace)
			}
			if report.Violations > 0 || report.Blocked > 0 {
				return errFindings
			}
			return nil
		},
	}
}

// applicationNames completes info's argument: the applications of the namespace, from its
// ApplicationPolicies and the clusters' summaries.
func (o *options) applicationNames(ctx context.Context) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	ns := o.namespace()
	names := map[string]bool{}
	aps := &policyhubv1.ApplicationPolicyList{}
	if c.List(ctx, aps, client.InNamespace(ns)) == nil {
		for _, ap := range aps.Items {
			names[ap.Spec.Application] = true
		}
	}
	if summaries, err := clusterSummaries(ctx, c); err == nil {
		for _, s := range summaries {
			for _, a := range s.Spec.Applications {
				if a.Namespace == ns {
					names[a.Name] = true
				}
			}
		}
	}
	delete(names, "")
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// info builds the report of application app in the namespace.
func (o *options) info(ctx context.Context, app string, now time.Time) (*infoReport, error) {
	c, err := o.hubClient()
	if err != nil {
		return nil, err
	}
	ns := o.namespace()
	summaries, err := clusterSummaries(ctx, c)
	if err != nil {
		return nil, err
	}
	live, err := agentLiveness(ctx, c, now)
	if err != nil {
		return nil, err
	}
	apList := &policyhubv1.ApplicationPolicyList{}
	if err := c.List(ctx, apList, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list ApplicationPolicies in %s: %w", ns, err)
	}
	var aps []*policyhubv1.ApplicationPolicy
	for i := range apList.Items {
		if apList.Items[i].Spec.Application == app {
			aps = append(aps, &apList.Items[i])
		}
	}
	report := buildInfo(app, ns, summaries, live, aps, now)
	active, err := readActiveExceptions(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	report.Exceptions = exceptionsIn(active, ns)
	return report, nil
}

// buildInfo gathers the application's results from the clusters' summaries (by cluster) and its
// ApplicationPolicies. The summaries are the source of the results; an ApplicationPolicy's own
// per-policy results fill in what a summary left out (a truncated one).
func buildInfo(app, ns string, summaries map[string]*policyhubv1.PolicyReportSummary, live liveness, aps []*policyhubv1.ApplicationPolicy, now time.Time) *infoReport {
	report := &infoReport{Application: app, Namespace: ns, ApplicationPolicies: []string{},
		Results: []appResult{}, TopViolations: []appViolation{}, BlockedAdmissions: []appBlocked{}}
	type key struct{ cluster, policy string }
	results := map[key]*appResult{}
	for cluster, s := range summaries {
		for _, a := range s.Spec.Applications {
			if a.Namespace != ns || a.Name != app {
				continue
			}
			k := key{cluster, a.Policy}
			r := results[k]
			if r == nil {
				r = &appResult{Cluster: cluster, Policy: a.Policy, ReportTime: reportTime(s, now), Stale: live.stale(s, now)}
				results[k] = r
			}
			r.Results.add(toReportCounts(a.Results))
			r.Blocked = aggregate.AddCount(r.Blocked, a.Blocked)
		}
	}
	seenViolation := map[string]bool{}
	for _, ap := range aps {
		report.ApplicationPolicies = append(report.ApplicationPolicies, ap.Name)
		for _, p := range ap.Status.Policies {
			// The status names a generated policy by name; the summaries, like this report,
			// name a namespaced policy namespace/name.
			ref := generatedPolicyRef(specOf(summaries[p.Cluster]), ap.Namespace, p.Policy)
			k := key{p.Cluster, ref}
			if r, ok := results[k]; ok {
				// A generated policy matches only the application's resources, so all its
				// refusals are the application's, also those the agent could not attribute
				// (a refused create leaves no object to read the application label from).
				r.Blocked = max(r.Blocked, p.Blocked)
			} else {
				r := &appResult{Cluster: p.Cluster, Policy: ref, Results: toReportCounts(p.Results), Blocked: p.Blocked}
				if s, ok := summaries[p.Cluster]; ok { // a summary that left the policy out (truncated)
					r.ReportTime, r.Stale = reportTime(s, now), live.stale(s, now)
				}
				results[k] = r
			}
			if p.LastBlocked != nil {
				b := appBlocked{Cluster: p.Cluster, Policy: ref, Count: p.Blocked, Message: oneLine(p.LastBlocked.Message), Time: p.LastBlocked.Time}
				if p.LastBlocked.Resource != nil {
					r := toResourceRef(*p.LastBlocked.Resource)
					b.Resource = &r
				}
				report.BlockedAdmissions = append(report.BlockedAdmissions, b)
			}
		}
		for _, v := range ap.Status.TopViolations {
			av := appViolation{Cluster: v.Cluster, Policy: v.Policy, Rule: v.Rule, Result: v.Result, Severity: v.Severity,
				Resource: toResourceRef(v.Resource), Message: oneLine(v.Message), Timestamp: v.Timestamp}
			id := strings.Join([]string{av.Cluster, av.Policy, av.Rule, av.Result, av.Resource.String()}, "\x00")
			if seenViolation[id] {
				continue
			}
			seenViolation[id] = true
			report.TopViolations = append(report.TopViolations, av)
		}
	}
	slices.Sort(report.ApplicationPolicies)
	for _, r := range results {
		report.Results = append(report.Results, *r)
		report.Totals.add(r.Results)
		report.Blocked = aggregate.AddCount(report.Blocked, r.Blocked)
	}
	report.Violations = report.Totals.violations()
	slices.SortFunc(report.Results, func(a, b appResult) int {
		return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Policy, b.Policy))
	})
	slices.SortFunc(report.TopViolations, compareViolations)
	slices.SortFunc(report.BlockedAdmissions, func(a, b appBlocked) int {
		return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Policy, b.Policy))
	})
	return report
}

// reportTime is when the hub saw the summary, by the hub's clock (nil when it cannot tell), as
// the ApplicationPolicies' status says it.
func reportTime(s *policyhubv1.PolicyReportSummary, now time.Time) *metav1.Time {
	if at, _ := aggregate.ObservedAt(s, now); !at.IsZero() {
		return &metav1.Time{Time: at}
	}
	return nil
}

// specOf is the summary's spec, nil for none.
func specOf(s *policyhubv1.PolicyReportSummary) *policyhubv1.PolicyReportSummarySpec {
	if s == nil {
		return nil
	}
	return &s.Spec
}

// generatedPolicyRef is how the cluster's summary names the ApplicationPolicy's generated policy
// name: namespace/name, with the namespace the summary knows it in (the application's, when
// several); the ApplicationPolicy's namespace when the summary does not list the policy.
func generatedPolicyRef(s *policyhubv1.PolicyReportSummarySpec, apNamespace, name string) string {
	namespace := ""
	if s != nil {
		for _, p := range s.Policies {
			if p.Name == name && p.Namespace != "" && (namespace == "" || p.Namespace == apNamespace) {
				namespace = p.Namespace
			}
		}
	}
	return policyhubv1.PolicyRef(cmp.Or(namespace, apNamespace), name)
}

// compareViolations orders violations most severe first, then newest first, then by cluster,
// policy, resource and rule, so that the order never depends on the sources' order.
func compareViolations(a, b appViolation) int {
	if c := cmp.Compare(policyhubv1.SeverityRank(a.Severity), policyhubv1.SeverityRank(b.Severity)); c != 0 {
		return c
	}
	var at, bt time.Time
	if a.Timestamp != nil {
		at = a.Timestamp.Time
	}
	if b.Timestamp != nil {
		bt = b.Timestamp.Time
	}
	if c := bt.Compare(at); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Policy, b.Policy),
		strings.Compare(a.Resource.String(), b.Resource.String()), strings.Compare(a.Rule, b.Rule), strings.Compare(a.Result, b.Result))
}

func printInfoTable(w io.Writer, r *infoReport, now time.Time) {
	fmt.Fprintf(w, "Application:\t%s\n", cellText(r.Application))
	fmt.Fprintf(w, "Namespace:\t%s\n", cellText(r.Namespace))
	fmt.Fprintf(w, "ApplicationPolicies:\t%s\n", cellText(listString(r.ApplicationPolicies)))
	fmt.Fprintf(w, "Violations:\t%d (fail %d, error %d)\n", r.Violations, r.Totals.Fail, r.Totals.Error)
	fmt.Fprintf(w, "Blocked:\t%d\n", r.Blocked)

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Results per cluster and policy:")
	if len(r.Results) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tableRow(w, "CLUSTER", "POLICY", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "BLOCKED")
		for _, res := range r.Results {
			cluster := res.Cluster
			if res.Stale {
				cluster += " (stale)"
			}
			c := res.Results
			tableRow(w, cluster, res.Policy, itoa(c.Pass), itoa(c.Fail), itoa(c.Warn), itoa(c.Error), itoa(c.Skip), itoa(res.Blocked))
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Top violations:")
	if len(r.TopViolations) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tableRow(w, "CLUSTER", "POLICY", "RULE", "RESULT", "SEVERITY", "RESOURCE", "MESSAGE")
		for _, v := range r.TopViolations {
			tableRow(w, v.Cluster, v.Policy, v.Rule, v.Result, v.Severity, v.Resource.String(), v.Message)
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Blocked admissions (the most recent per cluster and policy):")
	if len(r.BlockedAdmissions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tableRow(w, "CLUSTER", "POLICY", "COUNT", "RESOURCE", "AGE", "MESSAGE")
		for _, b := range r.BlockedAdmissions {
			resource := ""
			if b.Resource != nil {
				resource = b.Resource.String()
			}
			tableRow(w, b.Cluster, b.Policy, itoa(b.Count), resource, humanAge(b.Time, now), b.Message)
		}
	}
	printNamespaceExceptions(w, r.Exceptions, now)
}
