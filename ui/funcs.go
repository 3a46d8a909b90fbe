package ui

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/internal/textsafe"
	"github.com/policyhub/policyhub/ui/pages"
)

// funcs are the templates' helpers. Text from the hub and the clusters goes through "text":
// html/template escapes markup, and textsafe makes controls and bidirectional overrides visible,
// so a message can neither add to the page nor make it read differently.
func funcs() template.FuncMap {
	return template.FuncMap{
		"text":     textsafe.Line,
		"age":      age,
		"since":    sinceText,
		"clock":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"cluster":  pages.ClusterURL,
		"decl":     pages.DeclarationURL,
		"app":      pages.ApplicationURL,
		"ref":      policyhubv1.PolicyRef,
		"resource": func(r policyhubv1.ResourceRef) string { return textsafe.Line(pages.ResourceText(r)) },
		"violations": func(r *policyhubv1.ResultCounts) int64 {
			if r == nil {
				return 0
			}
			return aggregate.AddCount(r.Fail, r.Error)
		},
		"lower":   strings.ToLower,
		"labels":  labelText,
		"inforce": func(b *bool) string { return map[bool]string{true: "yes", false: "no"}[b != nil && *b] },
		"dur": func(d *metav1.Duration) string {
			if d == nil {
				return "—"
			}
			return d.Duration.String()
		},
	}
}

// age is a duration as kubectl shows ages: 45s, 3m, 2h, 5d.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// sinceText is how long before now t was (a metav1.Time or *metav1.Time).
func sinceText(now time.Time, t any) string {
	var at time.Time
	switch v := t.(type) {
	case metav1.Time:
		at = v.Time
	case *metav1.Time:
		if v != nil {
			at = v.Time
		}
	case time.Time:
		at = v
	}
	if at.IsZero() {
		return "—"
	}
	return age(now.Sub(at)) + " ago"
}

func labelText(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return textsafe.Line(strings.Join(parts, ", "))
}
