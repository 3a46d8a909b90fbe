package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
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

// info builds the report of application app in the namespace, as the web view's application
// page computes it (pages.BuildApplication).
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
	active, err := readActiveExceptions(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	in := pages.ApplicationInput{Namespace: ns, Name: app, Now: now,
		Stale: func(s *policyhubv1.PolicyReportSummary) bool { return live.stale(s, now) }}
	for _, s := range summaries {
		in.Summaries = append(in.Summaries, s)
	}
	for i := range apList.Items {
		in.ApplicationPolicies = append(in.ApplicationPolicies, &apList.Items[i])
	}
	for i := range active {
		in.Exceptions = append(in.Exceptions, &active[i])
	}
	return infoFrom(pages.BuildApplication(in)), nil
}

// infoFrom is the report of an application's page: its lists [] in JSON when empty, messages on
// one line.
func infoFrom(a *pages.Application) *infoReport {
	report := &infoReport{Application: a.Name, Namespace: a.Namespace, ApplicationPolicies: append([]string{}, a.ApplicationPolicies...),
		Totals: passKnown(toReportCounts(a.Totals), !a.PassUnknown), Violations: a.Violations, Blocked: a.Blocked,
		Results: []appResult{}, TopViolations: []appViolation{}, BlockedAdmissions: []appBlocked{}}
	for _, r := range a.Results {
		res := appResult{Cluster: r.Cluster, Policy: r.Policy, Results: passKnown(toReportCounts(r.Results), !r.PassUnknown), Blocked: r.Blocked, Stale: r.Stale}
		if !r.ReportTime.IsZero() {
			res.ReportTime = &metav1.Time{Time: r.ReportTime}
		}
		report.Results = append(report.Results, res)
	}
	for _, v := range a.TopViolations {
		report.TopViolations = append(report.TopViolations, appViolation{Cluster: v.Cluster, Policy: v.Policy, Rule: v.Rule, Result: v.Result,
			Severity: v.Severity, Resource: toResourceRef(v.Resource), Message: oneLine(v.Message), Timestamp: v.Timestamp})
	}
	for _, r := range a.Refusals {
		b := appBlocked{Cluster: r.Cluster, Policy: r.Policy, Count: r.Count, Message: oneLine(r.Message)}
		if !r.At.IsZero() {
			b.Time = &metav1.Time{Time: r.At}
		}
		if r.Resource != nil {
			ref := toResourceRef(*r.Resource)
			b.Resource = &ref
		}
		report.BlockedAdmissions = append(report.BlockedAdmissions, b)
	}
	for _, ex := range a.Exceptions {
		report.Exceptions = append(report.Exceptions, namespaceException{Namespace: ex.Namespace, Name: ex.Name, Policy: ex.Policy,
			ExpiresAt: metav1.Time{Time: ex.ExpiresAt}, InForce: ex.InForce, Exempted: ex.Exempted})
	}
	return report
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
			tableRow(w, cluster, res.Policy, c.cell("pass"), c.cell("fail"), c.cell("warn"), c.cell("error"), c.cell("skip"), itoa(res.Blocked))
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
