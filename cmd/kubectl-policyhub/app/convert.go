package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render/tocel"
)

func init() { commands = append(commands, newConvertCommand) }

type convertOptions struct {
	*options
	files       []string
	fleetPolicy string
}

func newConvertCommand(o *options) *cobra.Command {
	co := &convertOptions{options: o}
	cmd := &cobra.Command{
		Use:   "convert (-f FILE|- | --fleetpolicy NAME)",
		Short: "Convert legacy Kyverno validate policies to ValidatingPolicies (CEL), saying rule by rule what converted and why not",
		Long: `convert turns legacy Kyverno validate policies (kyverno.io/v1 ClusterPolicy or Policy) into their
CEL form, policies.kyverno.io/v1 ValidatingPolicy (NamespacedValidatingPolicy for a Policy), for
what converts mechanically: match and exclude by kind, namespace, name and selector; pattern and
anyPattern with Kyverno's anchors, wildcards and operators; foreach over a list of the resource;
the failure action (Enforce: Deny, Audit: Audit) and Kyverno's allowExistingViolations; autogen
for pod controllers. A policy with any rule it cannot convert exactly (an API call or ConfigMap
context, JMESPath beyond plain paths, a global anchor ...) is not converted: the report on
standard error names each such rule and why. Nothing is applied: the output is a new version to
review (and preview) before it replaces the legacy one.

With -f it reads policies from files, directories or standard input and prints the converted
policies; with --fleetpolicy it reads that FleetPolicy from the hub and prints it with its
template converted.

Exit codes: 0 every policy converted; 1 some were not (the others are printed); 2 usage or
runtime error.`,
		Example: `  # Convert a library of legacy policies, report on stderr
  kubectl policyhub convert -f policies/ > cel/policies.yaml

  # A FleetPolicy's template, as a new version of the FleetPolicy to review
  kubectl policyhub convert --fleetpolicy require-labels > require-labels-cel.yaml

  # The report and the converted objects as JSON
  kubectl policyhub convert -f require-probes.yaml -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("convert takes no arguments (got %q): give the policies with -f or --fleetpolicy", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return co.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&co.files, "filename", "f", nil, "Legacy policies to convert: a file, a directory (its .yaml, .yml and .json files) or - for stdin; repeatable.")
	f.StringVar(&co.fleetPolicy, "fleetpolicy", "", "A FleetPolicy on the hub whose template to convert.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

// convertReport is what convert found, policy by policy (-o json or yaml).
type convertReport struct {
	Policies []convertedPolicy `json:"policies"`
}

type convertedPolicy struct {
	// Policy is the legacy policy's kind and name.
	Policy    string `json:"policy"`
	Converted bool   `json:"converted"`
	// Refusals say why it was not converted; Notes what a reviewer should know of a conversion.
	Refusals []string `json:"refusals,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// Object is the converted policy, or the FleetPolicy with its template converted.
	Object map[string]any `json:"object,omitempty"`
}

func (co *convertOptions) run(ctx context.Context) error {
	if (len(co.files) == 0) == (co.fleetPolicy == "") {
		return usageError{errors.New("give the legacy policies with -f (a file, a directory, or - for stdin) or --fleetpolicy NAME, not both")}
	}
	var report convertReport
	if co.fleetPolicy != "" {
		p, err := co.convertFleetPolicy(ctx)
		if err != nil {
			return err
		}
		report.Policies = append(report.Policies, p)
	} else {
		objs, err := checkRead(co.files, co.streams.In)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			return usageError{fmt.Errorf("no objects in %s", strings.Join(co.files, ", "))}
		}
		for _, obj := range objs {
			p, err := convertOne(obj)
			if err != nil {
				return err
			}
			report.Policies = append(report.Policies, p)
		}
	}
	if err := co.printConverted(report); err != nil {
		return err
	}
	if n := refusedCount(report); n > 0 {
		fmt.Fprintf(co.streams.ErrOut, "%d of %d policies not converted\n", n, len(report.Policies))
		return errFindings
	}
	return nil
}

// convertOne converts one legacy policy.
func convertOne(obj *unstructured.Unstructured) (convertedPolicy, error) {
	res, err := tocel.Convert(obj)
	if err != nil {
		return convertedPolicy{}, usageError{err}
	}
	p := convertedPolicy{Policy: res.Report.Policy, Converted: !res.Report.Refused(), Refusals: res.Report.Reasons(), Notes: notesOf(res.Report)}
	if res.Policy != nil {
		p.Object = res.Policy.Object
	}
	return p, nil
}

// convertFleetPolicy converts the FleetPolicy's template: the FleetPolicy is printed with the
// converted policy as its template, its identity on the hub (uid, versions, status) left out.
func (co *convertOptions) convertFleetPolicy(ctx context.Context) (convertedPolicy, error) {
	hub, err := co.hubClient()
	if err != nil {
		return convertedPolicy{}, err
	}
	fp := &policyhubv1.FleetPolicy{}
	if err := hub.Get(ctx, client.ObjectKey{Name: co.fleetPolicy}, fp); err != nil {
		return convertedPolicy{}, fmt.Errorf("read FleetPolicy %s: %w", co.fleetPolicy, err)
	}
	legacy, err := templateObject(fp)
	if err != nil {
		return convertedPolicy{}, err
	}
	p, err := convertOne(legacy)
	if err != nil {
		return convertedPolicy{}, err
	}
	p.Policy = "FleetPolicy/" + fp.Name + " (" + p.Policy + ")"
	if !p.Converted {
		return p, nil
	}
	converted := &unstructured.Unstructured{Object: p.Object}
	// The template's labels stay; its annotations are the converted policy's (the legacy ones but
	// autogen's, which a ValidatingPolicy says in its spec, and where it was converted from).
	metadata := fp.Spec.Template.Metadata
	metadata.Annotations = converted.GetAnnotations()
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: converted.GetAPIVersion(), Kind: converted.GetKind(), Metadata: metadata}
	spec, err := json.Marshal(converted.Object["spec"])
	if err != nil {
		return convertedPolicy{}, fmt.Errorf("the converted spec of FleetPolicy %s: %w", fp.Name, err)
	}
	fp.Spec.Template.Spec = &runtime.RawExtension{Raw: spec}
	out, err := cleanDeclaration(fp)
	if err != nil {
		return convertedPolicy{}, err
	}
	p.Object = out
	return p, nil
}

// templateObject is the FleetPolicy's template as the policy object it is, named as the hub
// names it in the clusters (the template's name, else the FleetPolicy's).
func templateObject(fp *policyhubv1.FleetPolicy) (*unstructured.Unstructured, error) {
	t := fp.Spec.Template
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": t.APIVersion, "kind": t.Kind}}
	u.SetName(fp.Name)
	if t.Metadata.Name != "" {
		u.SetName(t.Metadata.Name)
	}
	u.SetNamespace(t.Metadata.Namespace)
	u.SetAnnotations(t.Metadata.Annotations)
	obj := u.Object
	if t.Spec != nil && len(t.Spec.Raw) > 0 {
		spec := map[string]any{}
		if err := json.Unmarshal(t.Spec.Raw, &spec); err != nil {
			return nil, fmt.Errorf("FleetPolicy %s: spec.template.spec: %w", fp.Name, err)
		}
		obj["spec"] = spec
	}
	return u, nil
}

// cleanDeclaration is fp as a manifest to review and apply: its name, labels, annotations and
// spec, without what the hub keeps of it (uid, versions, finalizers, status).
func cleanDeclaration(fp *policyhubv1.FleetPolicy) (map[string]any, error) {
	clean := &policyhubv1.FleetPolicy{Spec: fp.Spec}
	clean.APIVersion, clean.Kind = policyhubv1.GroupVersion.String(), policyhubv1.KindFleetPolicy
	clean.Name, clean.Labels, clean.Annotations = fp.Name, fp.Labels, fp.Annotations
	data, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("FleetPolicy %s: %w", fp.Name, err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("FleetPolicy %s: %w", fp.Name, err)
	}
	if md, ok := out["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	delete(out, "status")
	return out, nil
}

// printConverted prints the converted objects (YAML documents; -o json or yaml: the whole report)
// and, on standard error, what was not converted and the notes.
func (co *convertOptions) printConverted(report convertReport) error {
	for _, p := range report.Policies {
		switch {
		case !p.Converted:
			fmt.Fprintf(co.streams.ErrOut, "%s: not converted\n", p.Policy)
			for _, r := range p.Refusals {
				fmt.Fprintf(co.streams.ErrOut, "  - %s\n", r)
			}
		case len(p.Notes) > 0:
			fmt.Fprintf(co.streams.ErrOut, "%s: converted; note:\n", p.Policy)
			for _, n := range p.Notes {
				fmt.Fprintf(co.streams.ErrOut, "  - %s\n", n)
			}
		default:
			fmt.Fprintf(co.streams.ErrOut, "%s: converted\n", p.Policy)
		}
	}
	if co.output != "table" {
		return co.printReport(report, nil)
	}
	return writeDocuments(co.streams.Out, report)
}

// writeDocuments writes the converted objects as YAML documents.
func writeDocuments(w io.Writer, report convertReport) error {
	first := true
	for _, p := range report.Policies {
		if p.Object == nil {
			continue
		}
		data, err := yaml.Marshal(p.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Policy, err)
		}
		if !first {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		first = false
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// notesOf are the report's policy and rule notes, each saying where.
func notesOf(r tocel.Report) []string {
	notes := append([]string(nil), r.Notes...)
	for _, rule := range r.Rules {
		for _, n := range rule.Notes {
			notes = append(notes, "rule "+rule.Name+": "+n)
		}
	}
	return notes
}

func refusedCount(r convertReport) int {
	n := 0
	for _, p := range r.Policies {
		if !p.Converted {
			n++
		}
	}
	return n
}
