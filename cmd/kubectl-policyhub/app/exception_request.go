package app

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// exceptionRequest is the flags of `exception request`.
type exceptionRequest struct {
	// policy is NAME, fp/NAME or pset/NAME; member a PolicySet's member, KIND/[NAMESPACE/]NAME.
	policy, member string
	rules          []string
	// The resources exempted.
	namespaces, kinds, names []string
	selector                 string
	// matchConditions are NAME=EXPRESSION, CEL conditions for a policies.kyverno.io policy.
	matchConditions []string
	// Where: exactly one of clusters, clusterSelector and allClusters.
	clusters        []string
	clusterSelector string
	allClusters     bool
	// Who, why, where tracked.
	owner, reason, ticket string
	// Until when: exactly one of expiresIn (a duration, or whole days as 14d) and expiresAt
	// (RFC3339).
	expiresIn, expiresAt string
	dryRun               bool
}

// The bounds the API puts on the text fields (the CRD's MaxLength), checked before asking the hub.
const (
	maxOwnerLength   = 128
	maxReasonLength  = 1024
	maxTicketLength  = 256
	maxCommentLength = 512
)

func newExceptionRequestCommand(o *options) *cobra.Command {
	r := &exceptionRequest{}
	cmd := &cobra.Command{
		Use:   "request NAME --policy (FLEETPOLICY | pset/POLICYSET --member KIND/NAME) [flags]",
		Short: "Request an exception from a FleetPolicy's policy or a PolicySet member: inert until another user approves it",
		Long: `Create FleetPolicyException NAME in the namespace (-n, else the kubeconfig context's): a request to
exempt chosen resources, in chosen clusters, from a policy the hub runs there, until a date. It does
nothing until a user other than you approves it (kubectl policyhub exception approve NAME); the hub
then renders Kyverno's PolicyException in the clusters chosen, and removes it from every one of
them when it expires, is revoked, or its spec changes (a new spec needs a new approval).

The policy: --policy NAME or fp/NAME (a FleetPolicy's policy), or pset/NAME (a PolicySet) with
--member naming the set's member as KIND/NAME or KIND/NAMESPACE/NAME (e.g.
ClusterPolicy/disallow-privileged-containers). --rules narrows the exemption to some rules of a
kyverno.io policy (wildcards allowed); a policies.kyverno.io policy is exempted from as a whole.

The resources: --namespaces, --names (wildcards '*' and '?') and --selector (a label selector, as
kubectl's -l: app=web,tier in (a,b)); give at least one of them. --kinds (e.g. Deployment or
apps/v1/Deployment) narrows further, and so do --match-condition NAME=EXPRESSION (CEL over object,
oldObject and request; a policies.kyverno.io policy only, repeatable). A tenant's exception
reaches only the namespaces granted to it.

The clusters, among those the policy runs in: exactly one of --clusters (names), --cluster-selector
(cluster labels) and --all-clusters.

Who is accountable (--owner), why (--reason), where it is tracked (--ticket), and when it ends:
--expires-in (e.g. 72h, or whole days: 14d) or --expires-at (RFC3339), at most 90 days after it is
created unless the hub admin set another bound. All four are required.

spec.requestedBy is your user name as the hub knows you (a SelfSubjectReview): you are the requester,
and cannot approve your own request; the hub's admission policy checks it (and stamps it where the
hub serves MutatingAdmissionPolicy).
--dry-run has the hub validate the request (a server-side dry run, admission included) and prints
the object it would create (as YAML, or -o json), creating nothing.

-o json|yaml prints the FleetPolicyException created.`,
		Example: `  # Exempt Deployment web of namespace shop from FleetPolicy disallow-latest-tag, in two clusters, for 3 days
  kubectl policyhub exception request shop-web-latest -n shop --policy disallow-latest-tag \
    --namespaces shop --kinds Deployment --names web --clusters cluster-1,cluster-2 \
    --owner team-shop --reason "image pinned by digest next sprint" --ticket SHOP-1234 --expires-in 72h

  # Exempt the GPU runners from one rule of a PolicySet member, in every staging cluster
  kubectl policyhub exception request gpu-privileged -n batch --policy pset/pss-baseline \
    --member ClusterPolicy/disallow-privileged-containers --rules 'privileged-*' \
    --namespaces batch --selector 'app=gpu-runner' --cluster-selector env=staging \
    --owner team-batch --reason "the GPU driver needs privileges" --ticket OPS-42 \
    --expires-at 2030-07-01T00:00:00Z

  # Have the hub check a request, creating nothing
  kubectl policyhub exception request shop-web-latest -n shop --policy disallow-latest-tag \
    --names web --all-clusters --owner team-shop --reason "..." --ticket SHOP-1234 --expires-in 14d --dry-run`,
		ValidArgsFunction: noCompletion,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("request takes one NAME, the exception's (got %d arguments)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ns := o.namespace()
			ex, err := r.build(ns, args[0], time.Now())
			if err != nil {
				return err
			}
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			// A hub without the stamping policy (before Kubernetes 1.36) checks that the
			// requester names itself.
			if ex.Spec.RequestedBy, err = whoAmI(cmd.Context(), c); err != nil {
				return err
			}
			if err := requestException(cmd.Context(), c, ex, r.dryRun); err != nil {
				return err
			}
			if r.dryRun {
				format := o.output
				if format == "table" {
					format = "yaml"
				}
				if err := writeReport(o.streams.Out, format, printable(ex), nil); err != nil {
					return err
				}
				fmt.Fprintf(o.streams.ErrOut, "fleetpolicyexception %s/%s: dry run: the hub accepted the request and created nothing\n", ex.Namespace, ex.Name)
				return nil
			}
			return o.printReport(printable(ex), func(w io.Writer) error {
				_, err := fmt.Fprintln(w, requestedLine(ex))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.policy, "policy", "", "The policy exempted from: NAME or fp/NAME (a FleetPolicy), pset/NAME (a PolicySet, with --member).")
	f.StringVar(&r.member, "member", "", "The PolicySet member exempted from: KIND/NAME or KIND/NAMESPACE/NAME (required with --policy pset/NAME, only then).")
	f.StringSliceVar(&r.rules, "rules", nil, "Rules of a kyverno.io policy exempted from (wildcards allowed); default: every rule.")
	f.StringSliceVar(&r.namespaces, "namespaces", nil, "Namespaces of the resources exempted.")
	f.StringSliceVar(&r.kinds, "kinds", nil, "Kinds of the resources exempted, e.g. Deployment or apps/v1/Deployment; default: every kind the policy matches.")
	f.StringSliceVar(&r.names, "names", nil, "Names of the resources exempted ('*' and '?' wildcards).")
	f.StringVar(&r.selector, "selector", "", "Labels of the resources exempted, as a label selector: app=web,tier in (a,b).")
	f.StringArrayVar(&r.matchConditions, "match-condition", nil, "A CEL condition the resources exempted meet, NAME=EXPRESSION (a policies.kyverno.io policy only; repeatable).")
	f.StringSliceVar(&r.clusters, "clusters", nil, "Clusters the exception applies in, by name.")
	f.StringVar(&r.clusterSelector, "cluster-selector", "", "Clusters the exception applies in, by label: env=staging,region in (eu,us).")
	f.BoolVar(&r.allClusters, "all-clusters", false, "The exception applies in every cluster the policy runs in.")
	f.StringVar(&r.owner, "owner", "", "The team or person accountable for the exception (required).")
	f.StringVar(&r.reason, "reason", "", "Why the exemption is needed (required).")
	f.StringVar(&r.ticket, "ticket", "", "Where the exception is tracked: an issue, a change request (required).")
	f.StringVar(&r.expiresIn, "expires-in", "", "How long from now the exception lasts: a duration (72h) or whole days (14d).")
	f.StringVar(&r.expiresAt, "expires-at", "", "When the exception ends, RFC3339 (2030-07-01T00:00:00Z).")
	f.BoolVar(&r.dryRun, "dry-run", false, "Have the hub validate the request (server-side dry run) and print the object it would create; create nothing.")
	_ = cmd.RegisterFlagCompletionFunc("policy", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return o.exceptionPolicyNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// noCompletion completes nothing (a new name).
func noCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// exceptionPolicyNames completes --policy: the FleetPolicies (NAME) and PolicySets (pset/NAME).
func (o *options) exceptionPolicyNames(ctx context.Context) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	return fleetDeclarationNames(ctx, c)
}

// noRequesterWarning says why an exception without spec.requestedBy (one created before policyhub
// required it) can never be in force.
const noRequesterWarning = "spec.requestedBy is empty: nobody checked who requested it, so no approval will count; request it anew"

// requestedLine is what `exception request` prints once the hub created ex.
func requestedLine(ex *policyhubv1.FleetPolicyException) string {
	return fmt.Sprintf("fleetpolicyexception %s/%s requested by %s (generation %d); it is inert until an approver reviews it and runs: kubectl policyhub exception approve %s -n %s --generation %d",
		ex.Namespace, ex.Name, ex.Spec.RequestedBy, ex.Generation, ex.Name, ex.Namespace, ex.Generation)
}

// requestException creates ex (a server-side dry run with dryRun); ex is then the hub's answer.
func requestException(ctx context.Context, c client.Client, ex *policyhubv1.FleetPolicyException, dryRun bool) error {
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Create(ctx, ex, opts...); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("fleetpolicyexception %s/%s already exists: choose another NAME (changing its spec with kubectl edit lists you in its spec.changedBy, and needs a new approval)", ex.Namespace, ex.Name)
		}
		return exceptionsAPIError(err, fmt.Sprintf("request fleetpolicyexception %s/%s", ex.Namespace, ex.Name))
	}
	return nil
}

// build checks the flags and makes the FleetPolicyException they ask for, named name in
// namespace; the end date is taken from now. Every mistake is a usage error naming the flag.
func (r *exceptionRequest) build(namespace, name string, now time.Time) (*policyhubv1.FleetPolicyException, error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, usageError{fmt.Errorf("NAME %q: %s", name, strings.Join(errs, "; "))}
	}
	ex := &policyhubv1.FleetPolicyException{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: policyhubv1.KindFleetPolicyException},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
	spec := &ex.Spec
	var err error
	if spec.Target, err = r.target(); err != nil {
		return nil, err
	}
	if spec.Resources, err = r.resources(); err != nil {
		return nil, err
	}
	if spec.Clusters, err = r.where(); err != nil {
		return nil, err
	}
	for _, field := range []struct {
		flag, value, what string
		max               int
		to                *string
	}{
		{"owner", r.owner, "the team or person accountable for the exception", maxOwnerLength, &spec.Owner},
		{"reason", r.reason, "why the exemption is needed", maxReasonLength, &spec.Reason},
		{"ticket", r.ticket, "where the exception is tracked", maxTicketLength, &spec.Ticket},
	} {
		value := strings.TrimSpace(field.value)
		if value == "" {
			return nil, usageError{fmt.Errorf("--%s is required: %s", field.flag, field.what)}
		}
		if n := utf8.RuneCountInString(value); n > field.max {
			return nil, usageError{fmt.Errorf("--%s is %d characters long: at most %d", field.flag, n, field.max)}
		}
		*field.to = value
	}
	expires, err := expiry(r.expiresIn, r.expiresAt, now)
	if err != nil {
		return nil, err
	}
	spec.ExpiresAt = metav1.NewTime(expires.UTC().Truncate(time.Second))
	return ex, nil
}

// target reads --policy, --member and --rules.
func (r *exceptionRequest) target() (policyhubv1.ExceptionTarget, error) {
	var t policyhubv1.ExceptionTarget
	if r.policy == "" {
		return t, usageError{fmt.Errorf("--policy is required: the FleetPolicy (NAME or fp/NAME) or PolicySet (pset/NAME, with --member) to exempt from")}
	}
	ref, err := parseDeclarationRef(r.policy)
	if err != nil {
		return t, usageError{fmt.Errorf("--policy %q: give NAME or fp/NAME (a FleetPolicy), or pset/NAME (a PolicySet)", r.policy)}
	}
	switch ref.kind {
	case kindApplicationPolicy:
		return t, usageError{fmt.Errorf("--policy %q: an exception is from a FleetPolicy's policy or a PolicySet member, not from an ApplicationPolicy", r.policy)}
	case kindPolicySet:
		if r.member == "" {
			return t, usageError{fmt.Errorf("--member is required with a PolicySet (--policy %s): the member exempted from, as KIND/NAME or KIND/NAMESPACE/NAME", r.policy)}
		}
		if t.Member, err = parseMember(r.member); err != nil {
			return t, err
		}
	default:
		if r.member != "" {
			return t, usageError{fmt.Errorf("--member is for a PolicySet's member (--policy pset/NAME): FleetPolicy %s has one policy", ref.name)}
		}
	}
	t.Kind, t.Name = ref.kind, ref.name
	if t.Rules, err = cleanList("rules", r.rules); err != nil {
		return t, err
	}
	if len(t.Rules) > 0 && t.Member != nil && isCELPolicyKind(t.Member.Kind) {
		return t, usageError{fmt.Errorf("--rules: member %s is a policies.kyverno.io policy, exempted from as a whole: drop --rules", memberString(t.Member))}
	}
	return t, nil
}

// parseMember reads --member: KIND/NAME or KIND/NAMESPACE/NAME. A Kyverno policy kind written in
// another case is spelled as Kyverno does (the hub compares kinds exactly).
func parseMember(s string) (*policyhubv1.MemberRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return nil, usageError{fmt.Errorf("--member %q: give KIND/NAME or KIND/NAMESPACE/NAME, e.g. ClusterPolicy/disallow-privileged-containers", s)}
	}
	m := &policyhubv1.MemberRef{Kind: parts[0], Name: parts[len(parts)-1]}
	if len(parts) == 3 {
		m.Namespace = parts[1]
	}
	for _, gk := range work.PolicyKinds {
		if strings.EqualFold(gk.Kind, m.Kind) {
			m.Kind = gk.Kind
			break
		}
	}
	return m, nil
}

// isCELPolicyKind says whether kind is one of policies.kyverno.io's (exempted from as a whole).
func isCELPolicyKind(kind string) bool {
	return slices.ContainsFunc(work.PolicyKinds, func(gk schema.GroupKind) bool {
		return gk.Group == "policies.kyverno.io" && gk.Kind == kind
	})
}

// memberString is a member as --member takes it: KIND/NAME or KIND/NAMESPACE/NAME.
func memberString(m *policyhubv1.MemberRef) string {
	if m.Namespace == "" {
		return m.Kind + "/" + m.Name
	}
	return m.Kind + "/" + m.Namespace + "/" + m.Name
}

// resources reads --namespaces, --kinds, --names and --selector.
func (r *exceptionRequest) resources() (policyhubv1.ExceptionResources, error) {
	var res policyhubv1.ExceptionResources
	var err error
	if res.Namespaces, err = cleanList("namespaces", r.namespaces); err != nil {
		return res, err
	}
	if res.Kinds, err = cleanList("kinds", r.kinds); err != nil {
		return res, err
	}
	if res.Names, err = cleanList("names", r.names); err != nil {
		return res, err
	}
	if strings.TrimSpace(r.selector) != "" {
		if res.Selector, err = parseSelector("selector", r.selector); err != nil {
			return res, err
		}
	}
	for _, c := range r.matchConditions {
		name, expression, ok := strings.Cut(c, "=")
		name, expression = strings.TrimSpace(name), strings.TrimSpace(expression)
		if !ok || !conditionName.MatchString(name) || len(name) > 63 || expression == "" || strings.HasPrefix(expression, "=") {
			return res, usageError{fmt.Errorf("--match-condition %q: write NAME=EXPRESSION, NAME of letters, digits, '-', '_' and '.'", c)}
		}
		if strings.HasPrefix(name, "policyhub-") {
			return res, usageError{fmt.Errorf("--match-condition %q: names starting with policyhub- are the hub's own", c)}
		}
		res.MatchConditions = append(res.MatchConditions, policyhubv1.ExceptionMatchCondition{Name: name, Expression: expression})
	}
	// The hub would judge the exception Invalid: say so before asking it, in the hub's words.
	if err := render.SandboxedConditions(res); err != nil {
		return res, usageError{fmt.Errorf("--match-condition: %w", err)}
	}
	if len(res.Namespaces) == 0 && len(res.Names) == 0 && res.Selector == nil && len(res.MatchConditions) == 0 {
		return res, usageError{fmt.Errorf("give --namespaces, --names, --selector or --match-condition: an exception must narrow the resources it exempts (--kinds alone does not)")}
	}
	return res, nil
}

// conditionName is the CRD's pattern of a match condition's name.
var conditionName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// where reads --clusters, --cluster-selector and --all-clusters: exactly one of them.
func (r *exceptionRequest) where() (policyhubv1.ExceptionClusters, error) {
	var cl policyhubv1.ExceptionClusters
	given := 0
	for _, set := range []bool{len(r.clusters) > 0, strings.TrimSpace(r.clusterSelector) != "", r.allClusters} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return cl, usageError{fmt.Errorf("say where the exception applies: give --clusters NAMES, --cluster-selector SELECTOR or --all-clusters")}
	case given > 1:
		return cl, usageError{fmt.Errorf("give only one of --clusters, --cluster-selector and --all-clusters")}
	}
	var err error
	switch {
	case r.allClusters:
		cl.ClusterSelector = &policyhubv1.ClusterSelector{}
	case len(r.clusters) > 0:
		cl.Names, err = cleanList("clusters", r.clusters)
	default:
		cl.ClusterSelector, err = parseSelector("cluster-selector", r.clusterSelector)
	}
	return cl, err
}

// cleanList is a list flag's items, trimmed and without duplicates (the API's lists are sets),
// in order; an empty item is a mistake.
func cleanList(flag string, items []string) ([]string, error) {
	var out []string
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, usageError{fmt.Errorf("--%s has an empty item (%q)", flag, strings.Join(items, ","))}
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out, nil
}

// parseSelector reads a label selector flag (as kubectl's -l: k=v, k==v, k!=v, k in (a,b),
// k notin (a,b), k, !k) into the API's selector: equalities as matchLabels, the rest as
// matchExpressions (k!=v as k notin (v)). An empty selector is a mistake.
func parseSelector(flag, s string) (*policyhubv1.ClusterSelector, error) {
	reqs, err := labels.ParseToRequirements(s)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s %q: %w", flag, s, err)}
	}
	sel := &policyhubv1.ClusterSelector{}
	for _, req := range reqs {
		key, values := req.Key(), req.Values().List()
		var op metav1.LabelSelectorOperator
		switch req.Operator() {
		case selection.Equals, selection.DoubleEquals:
			if old, ok := sel.MatchLabels[key]; ok && old != values[0] {
				return nil, usageError{fmt.Errorf("--%s %q: %s=%s and %s=%s cannot both hold", flag, s, key, old, key, values[0])}
			}
			if sel.MatchLabels == nil {
				sel.MatchLabels = map[string]string{}
			}
			sel.MatchLabels[key] = values[0]
			continue
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.Exists:
			op, values = metav1.LabelSelectorOpExists, nil
		case selection.DoesNotExist:
			op, values = metav1.LabelSelectorOpDoesNotExist, nil
		default:
			return nil, usageError{fmt.Errorf("--%s %q: operator %s is not supported: use =, !=, in, notin, KEY or !KEY", flag, s, req.Operator())}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values})
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		if flag == "cluster-selector" {
			return nil, usageError{fmt.Errorf("--%s is empty: give labels, or --all-clusters for every cluster the policy runs in", flag)}
		}
		return nil, usageError{fmt.Errorf("--%s is empty: give labels, e.g. app=web", flag)}
	}
	return sel, nil
}

// expiry reads --expires-in and --expires-at (exactly one) into the end date, from now.
func expiry(in, at string, now time.Time) (time.Time, error) {
	in, at = strings.TrimSpace(in), strings.TrimSpace(at)
	switch {
	case in == "" && at == "":
		return time.Time{}, usageError{fmt.Errorf("give --expires-in or --expires-at: when the exception ends (at most 90 days after it is created, unless the hub admin set another bound)")}
	case in != "" && at != "":
		return time.Time{}, usageError{fmt.Errorf("give --expires-in or --expires-at, not both")}
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return time.Time{}, usageError{fmt.Errorf("--expires-at %q: give a time as RFC3339, e.g. 2030-07-01T00:00:00Z", at)}
		}
		if !t.After(now) {
			return time.Time{}, usageError{fmt.Errorf("--expires-at %s is not in the future", at)}
		}
		return t, nil
	}
	d, err := parseLifetime(in)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--expires-in %q: give a duration such as 72h or 90m, or whole days such as 14d", in)}
	}
	if d < time.Second {
		return time.Time{}, usageError{fmt.Errorf("--expires-in %q: give a positive duration", in)}
	}
	return now.Add(d), nil
}

// parseLifetime is time.ParseDuration, plus whole days: 14d.
func parseLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > 1000*365 || n < -1000*365 {
			return 0, fmt.Errorf("invalid number of days %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
