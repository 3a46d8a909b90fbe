package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// maxStatusExceptions bounds the exceptions status names per declaration (the rest are counted).
const maxStatusExceptions = 10

// activeException is an exception in force from a declaration's policy, as status shows it.
type activeException struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Member    string      `json:"member,omitempty"`
	ExpiresAt metav1.Time `json:"expiresAt"`
	InForce   int32       `json:"inForce"`
	Exempted  int64       `json:"exempted"`
}

// readActiveExceptions reads the Active exceptions the user may list: every namespace's, else
// (a tenant without that right) the namespace's. A hub without the kind has none.
func readActiveExceptions(ctx context.Context, c client.Client, namespace string) ([]policyhubv1.FleetPolicyException, error) {
	list := &policyhubv1.FleetPolicyExceptionList{}
	err := c.List(ctx, list)
	if apierrors.IsForbidden(err) {
		err = c.List(ctx, list, client.InNamespace(namespace))
	}
	switch {
	case isMissingCRD(err), apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list FleetPolicyExceptions: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(ex policyhubv1.FleetPolicyException) bool {
		return ex.Status.State != policyhubv1.ExceptionActive
	}), nil
}

// exceptionsFrom are the active exceptions from the declaration kind/name, the soonest to end
// first, at most maxStatusExceptions; more counts the rest.
func exceptionsFrom(all []policyhubv1.FleetPolicyException, kind, name string) (shown []activeException, more int) {
	for _, ex := range all {
		if ex.Spec.Target.Kind != kind || ex.Spec.Target.Name != name {
			continue
		}
		a := activeException{Namespace: ex.Namespace, Name: ex.Name, ExpiresAt: ex.Spec.ExpiresAt, InForce: ex.Status.InForce, Exempted: ex.Status.Exempted}
		if m := ex.Spec.Target.Member; m != nil {
			a.Member = memberString(m)
		}
		shown = append(shown, a)
	}
	slices.SortFunc(shown, func(a, b activeException) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if len(shown) > maxStatusExceptions {
		more = len(shown) - maxStatusExceptions
		shown = shown[:maxStatusExceptions]
	}
	return shown, more
}

// printStatusExceptions lists, under the table, the exceptions in force from each declaration.
func printStatusExceptions(w io.Writer, report *statusReport, now time.Time) {
	for _, d := range report.Declarations {
		for _, ex := range d.Exceptions {
			from := d.ref()
			if ex.Member != "" {
				from += " member " + ex.Member
			}
			fmt.Fprintf(w, "exception %s from %s: in force in %d clusters, %d results exempted, ends %s (%s)\n",
				cellText(ex.Namespace+"/"+ex.Name), cellText(from), ex.InForce, ex.Exempted, ex.ExpiresAt.UTC().Format(time.RFC3339), relativeTime(ex.ExpiresAt.Time, now))
		}
		if d.MoreExceptions > 0 {
			fmt.Fprintf(w, "and %d more exceptions from %s: kubectl policyhub exception list -A\n", d.MoreExceptions, cellText(d.ref()))
		}
	}
}

// namespaceException is an active exception that may exempt resources of a namespace.
type namespaceException struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Policy    string      `json:"policy"`
	ExpiresAt metav1.Time `json:"expiresAt"`
	InForce   int32       `json:"inForce"`
	Exempted  int64       `json:"exempted"`
}

// printNamespaceExceptions lists the exceptions that may exempt the application's resources.
func printNamespaceExceptions(w io.Writer, exceptions []namespaceException, now time.Time) {
	if len(exceptions) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exceptions in force in the namespace:")
	tableRow(w, "EXCEPTION", "POLICY", "IN-FORCE", "EXEMPTED", "ENDS")
	for _, ex := range exceptions {
		tableRow(w, ex.Namespace+"/"+ex.Name, ex.Policy, fmt.Sprint(ex.InForce), fmt.Sprint(ex.Exempted),
			ex.ExpiresAt.UTC().Format(time.RFC3339)+" ("+relativeTime(ex.ExpiresAt.Time, now)+")")
	}
}
