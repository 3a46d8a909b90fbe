package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func init() { commands = append(commands, newExceptionCommand) }

func newExceptionCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exception",
		Short: "Request, approve, deny, revoke and list FleetPolicyExceptions: owned, ticketed, approved, expiring exemptions",
		Long: `A FleetPolicyException exempts chosen resources, in chosen clusters, from a policy the hub runs
there (a FleetPolicy's, or one member of a PolicySet): owned by a team, with a reason, tracked in a
ticket, and ending at a date. It does nothing until a user other than its requester (and other than
anyone who changed its spec) approves the generation of its spec they reviewed; the hub then
renders Kyverno's PolicyException in the clusters it applies to, and removes it from every one of
them when it expires, is revoked, or its spec changes (a new spec needs a new approval).

  request   ask for an exception (you are its requester)
  approve   approve the spec generation you reviewed (an approver, never its requester)
  deny      refuse it
  revoke    withdraw an approval: the hub removes it from every cluster
  list      the exceptions of the namespace (-A: of every namespace), their state and end date`,
		Example: `  kubectl policyhub exception request shop-web-latest -n shop --policy disallow-latest-tag \
    --names web --namespaces shop --all-clusters --owner team-shop --reason "..." --ticket SHOP-1234 --expires-in 72h
  kubectl policyhub exception list -n shop          # GENERATION: the spec generation to review
  kubectl policyhub exception approve shop-web-latest -n shop --generation 1 --comment "until the next release"
  kubectl policyhub exception list -A`,
		// Without RunE cobra would print the help and exit 0 for a mistyped subcommand.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for exception: choose request, approve, deny, revoke or list", args[0])}
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newExceptionRequestCommand(o))
	for _, v := range exceptionVerbs {
		cmd.AddCommand(newExceptionDecideCommand(o, v))
	}
	cmd.AddCommand(newExceptionListCommand(o))
	return cmd
}

// printable is ex as -o json|yaml prints it: with its apiVersion and kind (the client drops them
// from typed objects), without managedFields (as kubectl get hides them).
func printable(ex *policyhubv1.FleetPolicyException) *policyhubv1.FleetPolicyException {
	out := ex.DeepCopy()
	out.APIVersion, out.Kind = policyhubv1.GroupVersion.String(), policyhubv1.KindFleetPolicyException
	out.ManagedFields = nil
	return out
}

// exceptionsAPIError explains a hub that does not serve FleetPolicyExceptions (a policyhub from
// before them); other errors are prefixed with what was being done.
func exceptionsAPIError(err error, doing string) error {
	if meta.IsNoMatchError(err) || isMissingCRD(err) {
		return fmt.Errorf("the hub does not serve fleetpolicyexceptions.policyhub.io: its policyhub is older than exceptions, or not installed (%s)", err.Error())
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// getException reads one exception, with a plain "not found" when it does not exist.
func getException(ctx context.Context, c client.Client, key client.ObjectKey) (*policyhubv1.FleetPolicyException, error) {
	ex := &policyhubv1.FleetPolicyException{}
	if err := c.Get(ctx, key, ex); err != nil {
		if apierrors.IsNotFound(err) && !isMissingCRD(err) {
			return nil, fmt.Errorf("fleetpolicyexception %s/%s not found", key.Namespace, key.Name)
		}
		return nil, exceptionsAPIError(err, fmt.Sprintf("read fleetpolicyexception %s/%s", key.Namespace, key.Name))
	}
	return ex, nil
}

// exceptionNames completes an exception's name: those of the namespace.
func (o *options) exceptionNames(ctx context.Context) []string {
	c, err := o.hubClient()
	if err != nil {
		return nil
	}
	list := &policyhubv1.FleetPolicyExceptionList{}
	if c.List(ctx, list, client.InNamespace(o.namespace())) != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, ex := range list.Items {
		names = append(names, ex.Name)
	}
	return names
}

// --- exception approve / deny / revoke ---

// exceptionVerb is one of the decisions an approver writes.
type exceptionVerb struct {
	// verb is the command, done and doing its participle and gerund, decision what it writes in
	// status.approval.decision.
	verb, done, doing, decision string
	short                       string
	// needsGeneration: the decision must name the spec generation reviewed (an approval puts that
	// spec in force; a denial or revocation only takes away).
	needsGeneration bool
}

var exceptionVerbs = []exceptionVerb{
	{"approve", "approved", "approving", policyhubv1.DecisionApproved,
		"Approve the spec generation of an exception you reviewed: the hub puts it in force until it expires", true},
	{"deny", "denied", "denying", policyhubv1.DecisionDenied,
		"Deny an exception's current spec: the hub does not put it in force", false},
	{"revoke", "revoked", "revoking", policyhubv1.DecisionRevoked,
		"Revoke an exception: the hub removes it from every cluster", false},
}

// exceptionDecision is -o json|yaml of `exception approve|deny|revoke`: the status.approval written.
type exceptionDecision struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Decision is Approved, Denied or Revoked.
	Decision string `json:"decision"`
	// By is you, as the hub knows you.
	By string `json:"by"`
	// Generation is the spec generation decided on.
	Generation int64       `json:"generation"`
	At         metav1.Time `json:"at"`
	Comment    string      `json:"comment,omitempty"`
	// Warnings: the decision was written, but may not do what was meant.
	Warnings []string `json:"warnings,omitempty"`
}

// whoAmI is the hub's name for the user of the client: a SelfSubjectReview's.
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("find out who you are on the hub (a SelfSubjectReview, Kubernetes 1.28 or later): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("find out who you are on the hub: its SelfSubjectReview names no user")
	}
	return review.Status.UserInfo.Username, nil
}

// decideException writes v's decision on the exception's spec generation reviewed (0: the
// current one), by the user the hub says you are, at now: status.approval, through the status
// subresource. A spec changed since the generation reviewed is refused here, and by admission
// (the decision names its generation, which must be the current one when it is written).
func decideException(ctx context.Context, c client.Client, key client.ObjectKey, v exceptionVerb, comment string, generation int64, now time.Time) (*exceptionDecision, error) {
	ex, err := getException(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if generation == 0 {
		generation = ex.Generation
	}
	if generation != ex.Generation {
		return nil, fmt.Errorf("fleetpolicyexception %s/%s is at generation %d, not %d: its spec changed since the generation you reviewed; review generation %d (kubectl get fleetpolicyexception %s -n %s -o yaml), then decide on it",
			key.Namespace, key.Name, ex.Generation, generation, ex.Generation, key.Name, key.Namespace)
	}
	user, err := whoAmI(ctx, c)
	if err != nil {
		return nil, err
	}
	if ex.Spec.RequestedBy == user {
		return nil, fmt.Errorf("fleetpolicyexception %s/%s: you (%s) requested it: another approver must decide", key.Namespace, key.Name, user)
	}
	if slices.Contains(ex.Spec.ChangedBy, user) {
		return nil, fmt.Errorf("fleetpolicyexception %s/%s: you (%s) changed its spec (spec.changedBy): another approver must decide", key.Namespace, key.Name, user)
	}
	res := &exceptionDecision{Namespace: key.Namespace, Name: key.Name, Decision: v.decision, By: user, Generation: generation,
		At: metav1.NewTime(now.UTC().Truncate(time.Second)), Comment: comment}
	if ex.Spec.RequestedBy == "" {
		res.Warnings = append(res.Warnings, noRequesterWarning)
	}
	// What keeps the hub from counting any approval of it, as the hub last said.
	if c := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionApproved); v.decision == policyhubv1.DecisionApproved && c != nil &&
		(c.Reason == policyhubv1.ReasonFenceMissing || c.Reason == policyhubv1.ReasonNotApprovable) {
		res.Warnings = append(res.Warnings, "the hub counts no approval of it: "+c.Message)
	}
	if !now.Before(ex.Spec.ExpiresAt.Time) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("it expired at %s: the decision changes nothing", ex.Spec.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	// The whole decision replaces the one before: a merge patch would otherwise keep an earlier
	// comment (null removes it).
	approval := map[string]any{"decision": res.Decision, "by": res.By, "generation": res.Generation, "at": res.At, "comment": nil}
	if comment != "" {
		approval["comment"] = comment
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"approval": approval}})
	if err != nil {
		return nil, err
	}
	if err := c.Status().Patch(ctx, ex, client.RawPatch(types.MergePatchType, patch)); err != nil {
		switch {
		case apierrors.IsNotFound(err) && !isMissingCRD(err):
			return nil, fmt.Errorf("fleetpolicyexception %s/%s not found", key.Namespace, key.Name)
		case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "spec.requestedBy"):
			return nil, fmt.Errorf("%s needs verb approve on fleetpolicyexceptions (the policyhub-exception-approver ClusterRole): %w", v.doing, err)
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "status.approval.generation"):
			return nil, fmt.Errorf("fleetpolicyexception %s/%s changed after you reviewed generation %d (a new generation of its spec): review it again, then decide: %w", key.Namespace, key.Name, generation, err)
		}
		return nil, exceptionsAPIError(err, fmt.Sprintf("%s fleetpolicyexception %s/%s", v.verb, key.Namespace, key.Name))
	}
	return res, nil
}

func newExceptionDecideCommand(o *options, v exceptionVerb) *cobra.Command {
	var comment string
	var generation int64
	long := fmt.Sprintf(`Decide on FleetPolicyException NAME of the namespace (-n, else the kubeconfig context's): write
status.approval {decision: %s, by: you, generation: the spec generation you reviewed, at: now,
comment}, through the status subresource. The decision counts for that generation only: a change
of the spec needs a new decision, and a decision on a generation that is no longer the current one
is refused.

Deciding needs verb approve on fleetpolicyexceptions (the policyhub-exception-approver ClusterRole);
you are who the hub says you are (a SelfSubjectReview). Neither the exception's requester
(spec.requestedBy) nor anyone who changed its spec (spec.changedBy) can decide on it, and nobody
who may write exceptions in its namespace can approve it. The hub's admission policy checks all of
this; the hub counts no approval while that policy is missing.
`, v.decision)
	switch v.decision {
	case policyhubv1.DecisionApproved:
		long += `
--generation is required: the spec generation you reviewed (kubectl policyhub exception list shows
it; kubectl get fleetpolicyexception NAME -o yaml shows that spec). Once approved, the hub puts the
exception in force in the clusters it applies to until it expires.`
	case policyhubv1.DecisionDenied:
		long += `
A denied exception is never put in force; an approved one is removed from every cluster.`
	case policyhubv1.DecisionRevoked:
		long += `
The hub removes a revoked exception from every cluster; it is not put in force again unless its
spec changes and it is approved again.`
	}
	long += `

-o json|yaml prints {"namespace", "name", "decision", "by", "generation", "at", "comment",
"warnings"}.`
	cmd := &cobra.Command{
		Use:     v.verb + " NAME [--comment TEXT]",
		Short:   v.short,
		Long:    long,
		Example: fmt.Sprintf(`  kubectl policyhub exception %s shop-web-latest -n shop --generation 2 --comment "see SHOP-1234"`, v.verb),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.exceptionNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
		},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one NAME, the exception's (got %d arguments)", v.verb, len(args))}
			}
			if n := utf8.RuneCountInString(comment); n > maxCommentLength {
				return usageError{fmt.Errorf("--comment is %d characters long: at most %d", n, maxCommentLength)}
			}
			if generation < 0 || (v.needsGeneration && generation == 0) {
				return usageError{fmt.Errorf("%s needs --generation N, the spec generation you reviewed (kubectl policyhub exception list shows it): "+
					"what you approve is that spec, and nothing written after it", v.verb)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			res, err := decideException(cmd.Context(), c, client.ObjectKey{Namespace: o.namespace(), Name: args[0]}, v, comment, generation, time.Now())
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(o.streams.ErrOut, "warning: %s\n", w)
			}
			return o.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "fleetpolicyexception %s/%s %s (generation %d) by %s\n", res.Namespace, res.Name, v.done, res.Generation, res.By)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", fmt.Sprintf("Why you %s it (status.approval.comment; at most %d characters).", v.verb, maxCommentLength))
	usage := "The spec generation you reviewed (metadata.generation); refused if the spec changed since."
	if v.needsGeneration {
		usage += " Required."
	} else {
		usage += " Default: the current one."
	}
	cmd.Flags().Int64Var(&generation, "generation", 0, usage)
	return cmd
}

// --- exception list ---

// exceptionRow is one exception in the list's table.
type exceptionRow struct {
	Namespace, Name string
	// Generation is the spec's generation, the one an approver reviews and names.
	Generation int64
	// Policy is the target as --policy and --member name it, whatever the hub resolved:
	// fp/NAME, pset/NAME, pset/NAME:KIND/NAME.
	Policy, State string
	// Why says why an exception is not in force where it asks to be (its Ready condition's
	// reason and message), for the Invalid and the Active ones; "" otherwise.
	Why string
	// Expires is the end date, RFC3339, and how far it is from now.
	Expires string
	InForce int32
	// Exempted are the results the exception turned into skip (status.exempted).
	Exempted                   int64
	Owner, Ticket, RequestedBy string
	ApprovedBy                 string
}

// exceptionRows are the exceptions' rows by namespace then name, with end dates relative to now.
func exceptionRows(items []policyhubv1.FleetPolicyException, now time.Time) []exceptionRow {
	rows := make([]exceptionRow, 0, len(items))
	for i := range items {
		ex := &items[i]
		row := exceptionRow{Namespace: ex.Namespace, Name: ex.Name, Generation: ex.Generation, Policy: exceptionTarget(ex.Spec.Target), State: ex.Status.State,
			InForce: ex.Status.InForce, Exempted: ex.Status.Exempted, Owner: ex.Spec.Owner, Ticket: ex.Spec.Ticket, RequestedBy: ex.Spec.RequestedBy}
		if row.State == policyhubv1.ExceptionActive || row.State == policyhubv1.ExceptionInvalid {
			if ready := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionReady); ready != nil && ready.Status == metav1.ConditionFalse && ready.ObservedGeneration == ex.Generation {
				row.Why = ready.Reason + ": " + ready.Message
			}
		}
		if !ex.Spec.ExpiresAt.IsZero() {
			row.Expires = ex.Spec.ExpiresAt.UTC().Format(time.RFC3339) + " (" + relativeTime(ex.Spec.ExpiresAt.Time, now) + ")"
		}
		// Only an approval of the current spec approves it.
		if a := ex.Status.Approval; a != nil && a.Decision == policyhubv1.DecisionApproved && a.Generation == ex.Generation {
			row.ApprovedBy = a.By
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b exceptionRow) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rows
}

// exceptionTarget is a target as --policy and --member name it: fp/NAME, pset/NAME:KIND/NAME.
func exceptionTarget(t policyhubv1.ExceptionTarget) string {
	if t.Kind != kindPolicySet {
		return "fp/" + t.Name
	}
	if t.Member == nil {
		return "pset/" + t.Name
	}
	return "pset/" + t.Name + ":" + memberString(t.Member)
}

// relativeTime is how far t is from now, as kubectl prints ages: "in 3d4h", "2m ago".
func relativeTime(t, now time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + duration.HumanDuration(d)
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

func printExceptionTable(w io.Writer, rows []exceptionRow, allNamespaces bool) {
	if len(rows) == 0 {
		return
	}
	header := []string{"NAME", "GENERATION", "POLICY", "STATE", "EXPIRES", "IN-FORCE", "EXEMPTED", "OWNER", "TICKET", "REQUESTED-BY", "APPROVED-BY"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	tableRow(w, header...)
	for _, r := range rows {
		cells := []string{r.Name, itoa(r.Generation), r.Policy, r.State, r.Expires, itoa(int64(r.InForce)), itoa(r.Exempted), r.Owner, r.Ticket, r.RequestedBy, r.ApprovedBy}
		if allNamespaces {
			cells = append([]string{r.Namespace}, cells...)
		}
		tableRow(w, cells...)
	}
	// Why an approved exception is not in force where it asks to be: a line each, under the table.
	for _, r := range rows {
		if r.Why != "" {
			fmt.Fprintf(w, "exception %s is %s, in force in %d clusters: %s\n", cellText(r.Namespace+"/"+r.Name), r.State, r.InForce, oneLine(r.Why))
		}
	}
}

// listExceptions reads the exceptions of namespace, or of every namespace.
func listExceptions(ctx context.Context, c client.Client, namespace string, allNamespaces bool) (*policyhubv1.FleetPolicyExceptionList, error) {
	list := &policyhubv1.FleetPolicyExceptionList{}
	var opts []client.ListOption
	if !allNamespaces {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, exceptionsAPIError(err, "list FleetPolicyExceptions")
	}
	return list, nil
}

// exceptionListReport is -o json|yaml of `exception list`: a FleetPolicyExceptionList, its items
// by namespace then name, as printable prints them.
func exceptionListReport(list *policyhubv1.FleetPolicyExceptionList) *policyhubv1.FleetPolicyExceptionList {
	out := &policyhubv1.FleetPolicyExceptionList{
		TypeMeta: metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: policyhubv1.KindFleetPolicyException + "List"},
		Items:    make([]policyhubv1.FleetPolicyException, 0, len(list.Items)),
	}
	for i := range list.Items {
		out.Items = append(out.Items, *printable(&list.Items[i]))
	}
	slices.SortFunc(out.Items, func(a, b policyhubv1.FleetPolicyException) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

func newExceptionListCommand(o *options) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "list [-n NAMESPACE | -A]",
		Short: "List the FleetPolicyExceptions: policy, state, end date, clusters in force, owner, requester, approver",
		Long: `List the FleetPolicyExceptions of the namespace (-n, else the kubeconfig context's; -A for every
namespace), by namespace then name.

GENERATION is the generation of the exception's spec: approve names the one you reviewed. POLICY is
the target as request's --policy and --member name it (fp/NAME, pset/NAME:KIND/NAME; -o json has
the Kyverno policy the hub resolved it to in status.policy). STATE is Pending (awaiting a decision
on the current spec), Active, Denied, Revoked, Expired or Invalid (approved or not, it can take
effect nowhere as it stands: its spec is refused, or not one of its places is granted to its
namespace), on the hub's clock ("-" before the hub saw it). Under the table, a line for each Active
or Invalid exception not in force where it asks to be says why.
EXPIRES is the end date and how far it is from now. IN-FORCE counts the clusters holding it,
EXEMPTED the report results it turned into skip there. APPROVED-BY is the approver of the current spec, if it is approved.

-o json|yaml prints a FleetPolicyExceptionList (apiVersion policyhub.io/v1alpha1): the exceptions
as the hub holds them, without managedFields.`,
		Example: `  # The exceptions of namespace shop
  kubectl policyhub exception list -n shop

  # Every exception awaiting a decision
  kubectl policyhub exception list -A -o json | jq -r '.items[] | select(.status.state == "Pending") | .metadata.namespace + "/" + .metadata.name'`,
		ValidArgsFunction: noCompletion,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("list takes no arguments (got %d): choose the namespace with -n, or -A", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.hubClient()
			if err != nil {
				return err
			}
			ns := o.namespace()
			list, err := listExceptions(cmd.Context(), c, ns, allNamespaces)
			if err != nil {
				return err
			}
			if err := o.printReport(exceptionListReport(list), func(w io.Writer) error {
				printExceptionTable(w, exceptionRows(list.Items, time.Now()), allNamespaces)
				return nil
			}); err != nil {
				return err
			}
			if len(list.Items) == 0 && o.output == "table" {
				if allNamespaces {
					fmt.Fprintln(o.streams.ErrOut, "No exceptions found.")
				} else {
					fmt.Fprintf(o.streams.ErrOut, "No exceptions found in namespace %s.\n", ns)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the exceptions of every namespace.")
	return cmd
}
