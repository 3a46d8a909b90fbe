package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Where Kyverno's version comes from, and why: Kyverno's admission controller serves no version
// endpoint the agent could reach without a network path of its own into Kyverno's namespace (its
// metrics need a scrape path and are often off; its webhook answers only the apiserver), while
// every install, Helm chart or manifests, runs it as a Deployment whose image tag is the
// release it runs. The agent reads that Deployment, and its container's flags for the settings
// the hub relies on, through the apiserver it already watches.

// Labels and names Kyverno's Helm chart gives its controllers' Deployments (charts/kyverno:
// app.kubernetes.io/component, the container "kyverno" of the admission controller and
// "controller" of the reports controller).
const (
	LabelComponent     = "app.kubernetes.io/component"
	ComponentAdmission = "admission-controller"
	ComponentReports   = "reports-controller"
	// DeploymentSelector selects both controllers' Deployments in Kyverno's namespace.
	DeploymentSelector = LabelComponent + " in (" + ComponentAdmission + "," + ComponentReports + ")"
)

// containerOf names each component's Kyverno container in the chart.
var containerOf = map[string]string{ComponentAdmission: "kyverno", ComponentReports: "controller"}

// The container flags read, and their defaults in Kyverno 1.16 to 1.19 (cmd/internal/flag.go:
// --enablePolicyException=false, --exceptionNamespace="", --allowedResults=every result).
const (
	flagPolicyExceptions   = "enablePolicyException"
	flagExceptionNamespace = "exceptionNamespace"
	flagAllowedResults     = "allowedResults"
)

var readFlags = []string{flagPolicyExceptions, flagExceptionNamespace, flagAllowedResults}

// maxKept bounds every string kept of a Deployment: a cluster is not trusted to be reasonable.
const maxKept = 512

// Deployment is what the agent keeps of one of Kyverno's Deployments: its identity, component,
// its Kyverno container's image and the values of the flags Facts reads (absent when not given).
type Deployment struct {
	Namespace, Name, Component string
	Image                      string
	Flags                      map[string]string
}

// FromDeployment keeps of d what Facts needs; ok is false when d is not one of Kyverno's
// controllers (no component label of theirs, or no container).
func FromDeployment(d *appsv1.Deployment) (Deployment, bool) {
	component := d.Labels[LabelComponent]
	want, known := containerOf[component]
	if !known {
		return Deployment{}, false
	}
	containers := d.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == want })
	if i < 0 && len(containers) == 1 {
		i = 0 // a renamed container in a one-container Deployment is still Kyverno's
	}
	if i < 0 {
		return Deployment{}, false
	}
	c := containers[i]
	args := c.Args
	if len(c.Command) > 1 {
		args = append(slices.Clone(c.Command[1:]), args...)
	}
	return Deployment{Namespace: d.Namespace, Name: d.Name, Component: component, Image: cut(c.Image, maxKept), Flags: ParseFlags(args, readFlags)}, true
}

// ParseFlags returns the values of the named flags in args, as Go's flag package (which Kyverno
// uses) would read them: "-name" or "--name", "=value" or, for a flag that is not boolean, the
// next argument; a flag given twice keeps the last; "--" ends the flags. A named flag given
// without a value (a boolean) is "true". Other arguments are skipped, whatever they are.
func ParseFlags(args []string, names []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(name, "=")
		if !slices.Contains(names, name) {
			continue
		}
		switch {
		case hasValue:
		case name == flagPolicyExceptions:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			continue // a string flag without its value: Kyverno would not start
		}
		out[name] = cut(value, maxKept)
	}
	return out
}

// versionPattern is what KyvernoFacts.Version admits (its CRD pattern).
var versionPattern = regexp.MustCompile(`^v?[0-9]+\.[0-9]+(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?$`)

// ImageVersion returns the version an image reference's tag says, e.g. v1.19.1 of
// reg.kyverno.io/kyverno/kyverno:v1.19.1 (also when a digest follows the tag); version is empty
// and why says so when the image has no tag (pinned by digest only) or its tag is no version
// (latest, main).
func ImageVersion(image string) (version, why string) {
	ref, _, _ := strings.Cut(image, "@") // a digest after the tag pins the image, the tag still names it
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash { // no tag, or the colon is a registry's port
		if strings.Contains(image, "@") {
			return "", "pinned by digest only, no tag"
		}
		return "", "no tag"
	}
	tag := ref[colon+1:]
	if len(tag) > policyhubv1.MaxKyvernoVersionLength || !versionPattern.MatchString(tag) {
		return "", fmt.Sprintf("tag %q is not a version", cut(tag, policyhubv1.MaxKyvernoVersionLength))
	}
	return tag, ""
}

// Facts returns what Kyverno's Deployments say of it: nil when no admission controller was
// found. reports, the reports controller's Deployment, may be nil.
func Facts(admission, reports *Deployment) *policyhubv1.KyvernoFacts {
	if admission == nil {
		return nil
	}
	f := &policyhubv1.KyvernoFacts{}
	source := "image tag of Deployment " + admission.Namespace + "/" + admission.Name
	version, why := ImageVersion(admission.Image)
	if version != "" {
		f.Version, f.VersionSource = version, source
	} else {
		f.VersionSource = source + ": " + why
	}
	f.VersionSource = cut(f.VersionSource, policyhubv1.MaxKyvernoVersionSourceLength)
	enabled := false // Kyverno's default when the flag is absent
	if v, given := admission.Flags[flagPolicyExceptions]; given {
		b, err := strconv.ParseBool(v)
		if err == nil {
			f.PolicyExceptions = &b
		} // else unknown: Kyverno refuses such a value and does not start
	} else {
		f.PolicyExceptions = &enabled
	}
	if ns := admission.Flags[flagExceptionNamespace]; len(ns) <= policyhubv1.MaxSummaryNamespaceLength {
		f.ExceptionNamespace = ns
	}
	if reports != nil {
		value, given := reports.Flags[flagAllowedResults]
		f.ReportedResults = ReportedResults(value, given)
	}
	return f
}

// resultKinds are Kyverno's results in the API's order.
var resultKinds = []string{"pass", "fail", "warn", "error", "skip"}

// ReportedResults returns the results an --allowedResults value lets Kyverno's reports
// controller write (it takes the exact words pass, fail, warn, error, skip, comma separated, and
// ignores others), in the API's order; nil when the flag was not given or allows every result.
func ReportedResults(value string, given bool) []string {
	if !given {
		return nil
	}
	allowed := strings.Split(value, ",")
	var out []string
	for _, r := range resultKinds {
		if slices.Contains(allowed, r) {
			out = append(out, r)
		}
	}
	if len(out) == len(resultKinds) {
		return nil
	}
	return out
}

// cut returns s cut to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
