package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

func init() { commands = append(commands, newPreviewCommand) }

// previewPoll is how often --wait reads the FleetPolicy: one GET of one object, so a wait costs
// the hub little however long it lasts.
var previewPoll = 2 * time.Second

// defaultPreviewTimeout is --timeout's default.
const defaultPreviewTimeout = 5 * time.Minute

// previewOptions are the flags of `preview`.
type previewOptions struct {
	*options
	file    string
	end     bool
	wait    bool
	timeout time.Duration
	// maxWouldFail is --max-would-fail; nil when not given.
	maxWouldFail *int64
}

func newPreviewCommand(o *options) *cobra.Command {
	po := &previewOptions{options: o}
	var maxWouldFail int64
	cmd := &cobra.Command{
		Use:   "preview FLEETPOLICY [-f FILE|- [--wait [--timeout D] [--max-would-fail N]] | --end]",
		Short: "Preview a candidate version of a FleetPolicy fleet-wide: what it would fail, per cluster, before it is enforced",
		Long: `A preview ships a report-only copy of a candidate policy (a shadow, named policyhub-shadow-NAME) to
every cluster the FleetPolicy is placed in, beside the version running there. The shadow never
denies a request and never counts toward compliance; each cluster's agent reports what it would
fail, and which of those resources the running version does not fail (newly failing).

  preview FLEETPOLICY            show the preview running: its totals, one row per cluster, and
                                 the first newly failing resources
  preview FLEETPOLICY -f FILE    start a preview of the Kyverno policy in FILE (- for stdin), or
                                 replace the candidate of the one running (spec.preview.template)
  preview FLEETPOLICY --end      end the preview (remove spec.preview): the hub removes the shadows

-f reads one policy (a file, a directory of .yaml, .yml and .json files, or -): a kyverno.io
ClusterPolicy or Policy, or a policies.kyverno.io ValidatingPolicy or NamespacedValidatingPolicy,
the kinds a shadow can be made of; a file with no object or several is refused. Its apiVersion,
kind, metadata name, namespace, labels and annotations, and spec become spec.preview.template,
written conditional on the FleetPolicy's resourceVersion (retried on conflict). The API server
refuses spec.preview on a FleetPolicy with spec.rollout.previewGate: its rollout previews each new
version itself (this command shows that preview too).

--wait waits until the hub has processed the new spec and every placed cluster has reported the
candidate's results (status.preview.completedAt), printing progress to standard error each time
the count of clusters that reported changes, then the report; it gives up after --timeout.
Without -f it waits for the preview running. --max-would-fail N judges a complete preview, for a
CI pipeline: exit 1 when more than N resources would fail, summed over the clusters.

The header says which candidate (its template revision, and where it is: spec.preview.template;
spec.template held back, for a preview without a template, which ships nothing but the shadow
until it ends; or spec.template before a rollout's waves start), the shadow's name, when the
preview started, when it completed or how many of the clusters reported so far, and the totals
over the clusters that reported: resources that would fail, newly failing ones, resources with a
result, and, when any is non-zero, how the candidate's verdicts compare with the running version's
(same, differ, only shadow, only live). The table has one row per cluster of the preview, most
newly failing first: REPORTED says whether its agent reported the candidate's results yet (the
counts are "-" until it has), FIRST NEWLY FAILING names up to 3 of them. Then the first newly
failing resources of the fleet (at most 20) with their cluster.

Exit codes: 0 ok; 1 a complete preview has more would-fail resources than --max-would-fail;
2 usage or runtime error: no preview running, a timeout (saying how many clusters reported), a
candidate refused.

-o json|yaml prints {"fleetPolicy", "candidate" (where the candidate is), "candidateRevision",
"upToDate" (false while the results are of an older spec or candidate), "revision" (the one the
results are of), "shadow", "startedAt", "completedAt", "complete", "clusters", "reported",
"resources", "wouldFail", "newlyFailing", "same", "differ", "onlyShadow", "onlyLive", "gate"
({"maxWouldFail", "maxNewlyFailing", "parity": {"maxDiffering"}}: spec.rollout.previewGate),
"perCluster": [{"name", "reported", "resources", "wouldFail", "newlyFailing", "differ",
"firstNewlyFailing": [{"apiVersion", "kind", "namespace", "name"}]}], "firstNewlyFailing":
[{"cluster", "apiVersion", "kind", "namespace", "name"}]}. -f without --wait prints {"fleetPolicy", "candidate", "revision",
"shadow", "generation", "changed", "replaced" (the revision of the candidate it replaced)};
--end prints {"fleetPolicy", "ended", "heldBack" (spec.template was held back and now ships)}.`,
		Example: `  # Preview a new version of a policy in force
  kubectl policyhub preview disallow-latest-tag -f disallow-latest-tag-v2.yaml

  # What it found so far
  kubectl policyhub preview disallow-latest-tag

  # In CI: preview a converted (CEL) version, wait for every cluster, fail over 0 would-fail
  kubectl policyhub convert -f require-labels.yaml > require-labels-cel.yaml
  kubectl policyhub preview require-labels -f require-labels-cel.yaml --wait --timeout 10m --max-would-fail 0

  # Done: remove the shadows
  kubectl policyhub preview disallow-latest-tag --end`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			c, err := o.hubClient()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			fps := &policyhubv1.FleetPolicyList{}
			if err := c.List(cmd.Context(), fps); err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			names := make([]string, 0, len(fps.Items))
			for _, fp := range fps.Items {
				names = append(names, fp.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("preview takes one FLEETPOLICY (got %d arguments)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-would-fail") {
				po.maxWouldFail = &maxWouldFail
			}
			if err := po.validate(cmd.Flags().Changed("timeout")); err != nil {
				return err
			}
			name, err := previewRef(args[0])
			if err != nil {
				return err
			}
			return po.run(cmd.Context(), name)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&po.file, "filename", "f", "", "The candidate: one Kyverno policy in a file, a directory (its .yaml, .yml and .json files) or - for stdin.")
	f.BoolVar(&po.end, "end", false, "End the preview: remove spec.preview (the hub removes the shadows).")
	f.BoolVar(&po.wait, "wait", false, "Wait until every placed cluster has reported the candidate's results, then print the report.")
	f.DurationVar(&po.timeout, "timeout", defaultPreviewTimeout, "How long --wait waits.")
	f.Int64Var(&maxWouldFail, "max-would-fail", 0, "Exit 1 when a complete preview has more than this many would-fail resources over the clusters.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

// validate refuses flags that do not go together, before anything is read or written.
func (po *previewOptions) validate(timeoutSet bool) error {
	switch {
	case po.file != "" && po.end:
		return usageError{errors.New("-f and --end are exclusive: -f starts (or replaces) a preview, --end ends it")}
	case po.end && po.wait:
		return usageError{errors.New("--wait waits for a preview's results: it does not go with --end")}
	case po.end && po.maxWouldFail != nil:
		return usageError{errors.New("--max-would-fail judges a preview's results: it does not go with --end")}
	case timeoutSet && !po.wait:
		return usageError{errors.New("--timeout is how long --wait waits: add --wait")}
	case po.wait && po.timeout <= 0:
		return usageError{fmt.Errorf("--timeout %s: give a positive duration, e.g. 10m", po.timeout)}
	case po.maxWouldFail != nil && *po.maxWouldFail < 0:
		return usageError{fmt.Errorf("--max-would-fail %d: give 0 or more", *po.maxWouldFail)}
	case po.file != "" && po.maxWouldFail != nil && !po.wait:
		return usageError{errors.New("--max-would-fail judges a complete preview, and a new candidate's results come later: add --wait")}
	}
	return nil
}

// previewRef reads the FLEETPOLICY argument: NAME or fp/NAME.
func previewRef(arg string) (string, error) {
	ref, err := parseDeclarationRef(arg)
	if err != nil {
		return "", err
	}
	if ref.kind != kindFleetPolicy {
		return "", usageError{fmt.Errorf("%q: previews are FleetPolicy's (spec.preview), not %s's", arg, ref.kind)}
	}
	return ref.name, nil
}

func (po *previewOptions) run(ctx context.Context, name string) error {
	var tmpl *policyhubv1.PolicyTemplate
	if po.file != "" {
		// The candidate is read, and refused, before the hub is asked anything.
		t, err := readCandidate(po.file, po.streams.In)
		if err != nil {
			return err
		}
		tmpl = &t
	}
	c, err := po.hubClient()
	if err != nil {
		return err
	}
	switch {
	case po.end:
		res, err := endPreview(ctx, c, name)
		if err != nil {
			return err
		}
		return po.printReport(res, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, res.String())
			return err
		})
	case tmpl != nil:
		res, fp, err := startPreview(ctx, c, name, *tmpl)
		if err != nil {
			return err
		}
		if !po.wait {
			return po.printReport(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s\n%s\n", res, res.nextStep())
				return err
			})
		}
		fmt.Fprintln(po.streams.ErrOut, res.String())
		return po.show(ctx, c, fp)
	}
	fp, err := getFleetPolicy(ctx, c, name)
	if err != nil {
		return err
	}
	return po.show(ctx, c, fp)
}

// show prints the preview of fp (after --wait, once it is complete) and judges it.
func (po *previewOptions) show(ctx context.Context, c client.Reader, fp *policyhubv1.FleetPolicy) error {
	target, err := previewTargetOf(fp)
	if err != nil {
		return err
	}
	// waitErr is a timeout: the report shows how far the preview got, then the command fails.
	var waitErr error
	if po.wait {
		last, err := po.waitComplete(ctx, c, fp.Name, target)
		var timeout *previewTimeoutError
		switch {
		case errors.Is(err, errMovedOn) && po.maxWouldFail != nil:
			return fmt.Errorf("--max-would-fail: the preview of FleetPolicy %s passed its rollout's own gate and is no longer shown: it cannot be judged against --max-would-fail", target.fleetPolicy)
		case errors.Is(err, errMovedOn):
			return nil // the progress line said so
		case errors.As(err, &timeout) && last != nil:
			waitErr = err
		case err != nil:
			return err
		}
		fp = last
	}
	var clusters []policyhubv1.ClusterStatus
	if fp.Status.Preview != nil {
		if clusters, err = clusterStates(ctx, c, fp, kindFleetPolicy); err != nil {
			return err
		}
	}
	report := buildPreviewReport(fp, clusters)
	if err := po.printReport(report, func(w io.Writer) error {
		printPreview(w, report, time.Now())
		return nil
	}); err != nil {
		return err
	}
	if waitErr != nil {
		return waitErr
	}
	msg, err := previewVerdict(report, po.maxWouldFail)
	if msg != "" {
		fmt.Fprintln(po.streams.ErrOut, msg)
	}
	return err
}

// getFleetPolicy reads a FleetPolicy, with a plain "not found" when it does not exist.
func getFleetPolicy(ctx context.Context, c client.Reader, name string) (*policyhubv1.FleetPolicy, error) {
	fp := &policyhubv1.FleetPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
		if apierrors.IsNotFound(err) && !isMissingCRD(err) {
			return nil, fmt.Errorf("FleetPolicy %s not found", name)
		}
		return nil, fmt.Errorf("read FleetPolicy %s: %w", name, err)
	}
	return fp, nil
}

// --- the candidate ---

// previewableKinds are the kinds a shadow can be made of (render.Shadow), by group.
var previewableKinds = map[string][]string{
	"kyverno.io":          {"ClusterPolicy", "Policy"},
	"policies.kyverno.io": {"ValidatingPolicy", "NamespacedValidatingPolicy"},
}

// previewableKindsText names them in a sentence.
const previewableKindsText = "a kyverno.io ClusterPolicy or Policy, or a policies.kyverno.io ValidatingPolicy or NamespacedValidatingPolicy"

// previewable says whether an object of apiVersion and kind can be previewed.
func previewable(apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && slices.Contains(previewableKinds[gv.Group], kind)
}

// maxNamedObjects bounds the objects an error about -f names.
const maxNamedObjects = 5

// readCandidate reads the one Kyverno policy in file (a file, a directory or - for stdin) as the
// template spec.preview holds: its apiVersion, kind, name, namespace, labels, annotations (but
// kubectl's last-applied-configuration) and spec.
func readCandidate(file string, stdin io.Reader) (policyhubv1.PolicyTemplate, error) {
	objs, err := checkRead([]string{file}, stdin)
	if err != nil {
		return policyhubv1.PolicyTemplate{}, err
	}
	switch len(objs) {
	case 0:
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: no object found: give one Kyverno policy to preview (%s)", file, previewableKindsText)}
	case 1:
	default:
		var found []string
		for _, obj := range objs[:min(len(objs), maxNamedObjects)] {
			found = append(found, objectText(obj))
		}
		if len(objs) > maxNamedObjects {
			found = append(found, fmt.Sprintf("and %d more", len(objs)-maxNamedObjects))
		}
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s holds %d objects (%s): a preview takes one Kyverno policy", file, len(objs), strings.Join(found, ", "))}
	}
	obj := objs[0]
	if !previewable(obj.GetAPIVersion(), obj.GetKind()) {
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: %s cannot be previewed: a preview's candidate is %s", file, objectText(obj), previewableKindsText)}
	}
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return policyhubv1.PolicyTemplate{}, usageError{fmt.Errorf("-f %s: %s has no spec", file, objectText(obj))}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return policyhubv1.PolicyTemplate{}, fmt.Errorf("-f %s: %s: spec: %w", file, objectText(obj), err)
	}
	annotations := maps.Clone(obj.GetAnnotations())
	delete(annotations, "kubectl.kubernetes.io/last-applied-configuration")
	if len(annotations) == 0 {
		annotations = nil
	}
	return policyhubv1.PolicyTemplate{
		APIVersion: obj.GetAPIVersion(),
		Kind:       obj.GetKind(),
		Metadata: policyhubv1.TemplateMetadata{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: annotations,
		},
		Spec: &runtime.RawExtension{Raw: raw},
	}, nil
}

// objectText names an object read from a file: apiVersion Kind namespace/name.
func objectText(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetAPIVersion() + " " + obj.GetKind() + " " + name
}

// templateText names a template: Kind/name (the FleetPolicy's name when it has none).
func templateText(t policyhubv1.PolicyTemplate, fleetPolicy string) string {
	return t.Kind + "/" + cmp.Or(t.Metadata.Name, fleetPolicy)
}

// --- start ---

// previewStarted is `preview NAME -f FILE`'s -o json|yaml without --wait.
type previewStarted struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Candidate is the candidate's Kind/name.
	Candidate string `json:"candidate"`
	// Revision is the candidate's template revision (status.preview.revision once the hub has
	// started it).
	Revision string `json:"revision"`
	// Shadow is the shadow's name in the clusters.
	Shadow string `json:"shadow"`
	// Generation is the FleetPolicy's generation with this candidate.
	Generation int64 `json:"generation"`
	// Changed is false when spec.preview already held this candidate.
	Changed bool `json:"changed"`
	// Replaced is the revision of the candidate this one replaced, if any.
	Replaced string `json:"replaced,omitempty"`
}

func (r *previewStarted) String() string {
	s := fmt.Sprintf("fleetpolicy/%s: previewing %s (revision %s, shadow %s)", r.FleetPolicy, r.Candidate, r.Revision, r.Shadow)
	if r.Replaced != "" {
		s += ", replacing revision " + r.Replaced
	}
	return s + unchanged(r.Changed)
}

// nextStep says how to read the preview just started.
func (r *previewStarted) nextStep() string {
	return fmt.Sprintf("Its results come as each cluster's agent reports: `kubectl policyhub preview %s` shows them, with --wait once every cluster reported.", r.FleetPolicy)
}

// withPreview is fp with spec.preview.template set to tmpl.
func withPreview(fp *policyhubv1.FleetPolicy, tmpl policyhubv1.PolicyTemplate) *policyhubv1.FleetPolicy {
	out := fp.DeepCopy()
	t := *tmpl.DeepCopy()
	out.Spec.Preview = &policyhubv1.PreviewSpec{Template: &t}
	return out
}

// startPreview sets spec.preview.template of FleetPolicy name to tmpl and returns what it did and
// the FleetPolicy as the API server stored it.
func startPreview(ctx context.Context, c client.Client, name string, tmpl policyhubv1.PolicyTemplate) (*previewStarted, *policyhubv1.FleetPolicy, error) {
	var res *previewStarted
	var stored *policyhubv1.FleetPolicy
	// The patch carries the resourceVersion it was computed from: a candidate written meanwhile
	// by someone else is replaced knowingly (recomputed), never merged with this one.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return err
		}
		res = &previewStarted{FleetPolicy: name, Candidate: templateText(tmpl, name), Shadow: policyhubv1.ShadowName(cmp.Or(tmpl.Metadata.Name, name))}
		if fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil {
			if res.Replaced, err = render.TemplateRevision(*fp.Spec.Preview.Template); err != nil {
				return fmt.Errorf("FleetPolicy %s: spec.preview.template: %w", name, err)
			}
		}
		patched := withPreview(fp, tmpl)
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			// The API server's own words: it names the field it refuses and why (e.g.
			// spec.rollout.previewGate, a namespaced kind without a namespace).
			return fmt.Errorf("set spec.preview of FleetPolicy %s: %w", name, err)
		}
		stored = patched
		res.Generation, res.Changed = patched.Generation, patched.Generation != fp.Generation
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, nil, fmt.Errorf("set spec.preview of FleetPolicy %s: the object kept changing meanwhile, try again: %w", name, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if stored.Spec.Preview == nil || stored.Spec.Preview.Template == nil {
		return nil, nil, fmt.Errorf("set spec.preview of FleetPolicy %s: the API server kept no spec.preview.template (is the hub's CRD older than this CLI?)", name)
	}
	// The revision of the candidate as stored: the one the hub computes and status.preview names.
	if res.Revision, err = render.TemplateRevision(*stored.Spec.Preview.Template); err != nil {
		return nil, nil, fmt.Errorf("FleetPolicy %s: spec.preview.template: %w", name, err)
	}
	if res.Replaced == res.Revision {
		res.Replaced = ""
	}
	return res, stored, nil
}

// --- end ---

// previewEnded is `preview NAME --end`'s -o json|yaml.
type previewEnded struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Ended is false when there was no spec.preview to remove.
	Ended bool `json:"ended"`
	// HeldBack is true when spec.preview had no template: spec.template was held back, and now
	// ships to the clusters.
	HeldBack bool `json:"heldBack,omitempty"`
	// Gate is true when the FleetPolicy's rollout has a preview gate, which previews by itself.
	Gate bool `json:"gate,omitempty"`
}

func (r *previewEnded) String() string {
	switch {
	case !r.Ended && r.Gate:
		return fmt.Sprintf("fleetpolicy/%s has no spec.preview: nothing to end (its rollout previews each new version itself, spec.rollout.previewGate)", r.FleetPolicy)
	case !r.Ended:
		return fmt.Sprintf("fleetpolicy/%s has no spec.preview: nothing to end", r.FleetPolicy)
	case r.HeldBack:
		return fmt.Sprintf("fleetpolicy/%s: preview ended (spec.preview removed): the hub removes the shadows, and spec.template, held back during the preview, now ships to the clusters", r.FleetPolicy)
	}
	return fmt.Sprintf("fleetpolicy/%s: preview ended (spec.preview removed): the hub removes the shadows", r.FleetPolicy)
}

// endPreview removes spec.preview of FleetPolicy name.
func endPreview(ctx context.Context, c client.Client, name string) (*previewEnded, error) {
	var res *previewEnded
	// Conditional on the resourceVersion read, so that what the command says it removed (a held
	// back spec.template now ships) is what it removed.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return err
		}
		res = &previewEnded{FleetPolicy: name, Gate: fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil}
		if fp.Spec.Preview == nil {
			return nil
		}
		res.HeldBack = fp.Spec.Preview.Template == nil
		patched := fp.DeepCopy()
		patched.Spec.Preview = nil
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("remove spec.preview of FleetPolicy %s: %w", name, err)
		}
		res.Ended = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("remove spec.preview of FleetPolicy %s: the object kept changing meanwhile, try again: %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// --- what runs, and waiting for it ---

// Where a FleetPolicy's candidate is.
const (
	candidatePreviewTemplate = "spec.preview.template"
	candidateHeldBack        = "spec.template (held back: only its shadow ships until the preview ends)"
	candidateRolloutGate     = "spec.template (spec.rollout.previewGate: before its waves start)"
)

// previewTarget is the preview a FleetPolicy asks for: its candidate's revision and where the
// candidate is, at the FleetPolicy's generation.
type previewTarget struct {
	fleetPolicy string
	revision    string
	candidate   string
	generation  int64
}

// previewTargetOf is the preview fp runs, as the hub decides it (controllers.previewCandidate):
// spec.preview's template, else spec.template when spec.preview is set (held back); else, when
// the rollout's preview gate previews a new version (status.preview is set), spec.template. An
// error says no preview runs.
func previewTargetOf(fp *policyhubv1.FleetPolicy) (previewTarget, error) {
	t := previewTarget{fleetPolicy: fp.Name, generation: fp.Generation}
	tmpl := &fp.Spec.Template
	switch {
	case fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil:
		tmpl, t.candidate = fp.Spec.Preview.Template, candidatePreviewTemplate
	case fp.Spec.Preview != nil:
		t.candidate = candidateHeldBack
	case fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil && fp.Status.Preview != nil:
		t.candidate = candidateRolloutGate
	case fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil:
		return t, fmt.Errorf("FleetPolicy %s has no preview running: its rollout previews each new version of spec.template before its waves start (spec.rollout.previewGate), and no wave is waiting for one", fp.Name)
	default:
		return t, fmt.Errorf("FleetPolicy %s has no preview running: start one with `kubectl policyhub preview %s -f CANDIDATE`", fp.Name, fp.Name)
	}
	rev, err := render.TemplateRevision(*tmpl)
	if err != nil {
		return t, fmt.Errorf("FleetPolicy %s: %s: %w", fp.Name, t.candidate, err)
	}
	t.revision = rev
	return t, nil
}

// previewState is where a preview stands for a waiting command.
type previewState struct {
	// line says it in one line; the command prints it when it changes.
	line string
	done bool
	// movedOn: the rollout's preview completed within its gate and the waves started, so
	// the hub no longer shows it (status.preview is gone).
	movedOn bool
	// err: it will not complete (the candidate changed, the hub cannot run it).
	err error
}

// previewProgress is where the preview target asks for stands in fp, as read now.
func previewProgress(fp *policyhubv1.FleetPolicy, target previewTarget) previewState {
	if rolloutMovedOn(fp, target) {
		return previewState{movedOn: true, line: fmt.Sprintf("FleetPolicy %s: the preview of revision %s passed spec.rollout.previewGate and the rollout started its waves (kubectl policyhub rollout status %s)", fp.Name, target.revision, fp.Name)}
	}
	now, err := previewTargetOf(fp)
	switch {
	case err != nil:
		return previewState{err: fmt.Errorf("the preview of FleetPolicy %s ended meanwhile (spec.preview removed, or its rollout moved on)", fp.Name)}
	case now.revision != target.revision:
		return previewState{err: fmt.Errorf("the candidate of FleetPolicy %s was replaced meanwhile: %s is now revision %s, not %s", fp.Name, now.candidate, now.revision, target.revision)}
	case fp.Status.ObservedGeneration < target.generation:
		return previewState{line: fmt.Sprintf("FleetPolicy %s: waiting for the hub to process generation %d (it has processed %d)", fp.Name, target.generation, fp.Status.ObservedGeneration)}
	}
	if s := meta.FindStatusCondition(fp.Status.Conditions, policyhubv1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue && s.ObservedGeneration >= target.generation {
		return previewState{err: fmt.Errorf("the hub cannot run the preview of FleetPolicy %s: %s: %s", fp.Name, s.Reason, s.Message)}
	}
	p := fp.Status.Preview
	if p == nil || p.Revision != target.revision {
		return previewState{line: fmt.Sprintf("FleetPolicy %s: waiting for the hub to start the preview of revision %s", fp.Name, target.revision)}
	}
	return previewState{line: fmt.Sprintf("FleetPolicy %s: reported %d of %d clusters", fp.Name, p.Reported, p.Clusters), done: p.CompletedAt != nil}
}

// rolloutMovedOn says whether the rollout's preview of target has ended because it passed the
// gate: the hub shows a rollout's preview only until the waves it holds start, so a complete preview
// may be gone before a poll sees it.
func rolloutMovedOn(fp *policyhubv1.FleetPolicy, target previewTarget) bool {
	if target.candidate != candidateRolloutGate || fp.Spec.Preview != nil || fp.Status.Preview != nil ||
		fp.Spec.Rollout == nil || fp.Spec.Rollout.PreviewGate == nil || fp.Status.Rollout == nil || fp.Status.Rollout.Revision != target.revision {
		return false
	}
	rev, err := render.TemplateRevision(fp.Spec.Template)
	return err == nil && rev == target.revision
}

// waitComplete polls FleetPolicy name until the preview target asks for is complete, printing a
// progress line to standard error whenever it changes. It returns the FleetPolicy as last read
// (nil when never read) and, on a timeout, an error saying how far the preview got.
func (po *previewOptions) waitComplete(ctx context.Context, c client.Reader, name string, target previewTarget) (*policyhubv1.FleetPolicy, error) {
	waitCtx, cancel := context.WithTimeout(ctx, po.timeout)
	defer cancel()
	var last *policyhubv1.FleetPolicy
	shown := ""
	for {
		fp, err := getFleetPolicy(waitCtx, c, name)
		switch {
		case err != nil && ctx.Err() == nil && waitCtx.Err() != nil:
			return last, previewTimeout(last, target, po.timeout)
		case err != nil:
			return nil, err
		}
		last = fp
		state := previewProgress(fp, target)
		if state.line != "" && state.line != shown {
			fmt.Fprintln(po.streams.ErrOut, state.line)
			shown = state.line
		}
		switch {
		case state.movedOn:
			return fp, errMovedOn
		case state.err != nil || state.done:
			return fp, state.err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-waitCtx.Done():
			return fp, previewTimeout(fp, target, po.timeout)
		case <-time.After(previewPoll):
		}
	}
}

// errMovedOn is waitComplete's error when the rollout's preview passed its gate and is gone.
var errMovedOn = errors.New("the rollout's preview passed its gate")

// previewTimeoutError is a wait that timed out.
type previewTimeoutError struct{ msg string }

func (e *previewTimeoutError) Error() string { return e.msg }

// previewTimeout is the error of a wait that timed out, saying how far the preview got.
func previewTimeout(fp *policyhubv1.FleetPolicy, target previewTarget, after time.Duration) error {
	prefix := fmt.Sprintf("timed out after %s waiting for the preview of FleetPolicy %s (revision %s)", after, target.fleetPolicy, target.revision)
	var why string
	switch {
	case fp == nil:
		why = "the FleetPolicy could not be read"
	case fp.Status.ObservedGeneration < target.generation:
		why = fmt.Sprintf("the hub has not processed generation %d yet (status.observedGeneration %d): is the hub running?", target.generation, fp.Status.ObservedGeneration)
	case fp.Status.Preview == nil || fp.Status.Preview.Revision != target.revision:
		why = "the hub has not started it yet"
	default:
		why = fmt.Sprintf("%d of %d clusters reported", fp.Status.Preview.Reported, fp.Status.Preview.Clusters)
	}
	return &previewTimeoutError{msg: prefix + ": " + why}
}

// --- the report ---

// previewReport is `preview`'s -o json|yaml: a FleetPolicy's preview and every cluster's part.
// Every count is always printed.
type previewReport struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Candidate says where the candidate is (spec.preview.template, or spec.template).
	Candidate string `json:"candidate"`
	// CandidateRevision is the revision of the candidate the FleetPolicy holds now.
	CandidateRevision string `json:"candidateRevision"`
	// UpToDate is false while the results are of an older spec or candidate (the hub has not
	// processed the latest), or not started.
	UpToDate bool `json:"upToDate"`
	// Revision is the revision the results are of (status.preview.revision); empty before the hub
	// started the preview.
	Revision    string       `json:"revision"`
	Shadow      string       `json:"shadow"`
	StartedAt   *metav1.Time `json:"startedAt,omitempty"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Complete: every placed cluster reported the candidate's results.
	Complete bool `json:"complete"`
	// Clusters the shadow is placed in, Reported those that reported; the totals are theirs.
	Clusters     int32 `json:"clusters"`
	Reported     int32 `json:"reported"`
	Resources    int64 `json:"resources"`
	WouldFail    int64 `json:"wouldFail"`
	NewlyFailing int64 `json:"newlyFailing"`
	Same         int64 `json:"same"`
	Differ       int64 `json:"differ"`
	OnlyShadow   int64 `json:"onlyShadow"`
	OnlyLive     int64 `json:"onlyLive"`
	// Gate is the rollout's preview gate, when the rollout previews.
	Gate *policyhubv1.PreviewGate `json:"gate,omitempty"`
	// PerCluster is every cluster of the preview, most newly failing first, then by name.
	PerCluster []previewCluster `json:"perCluster"`
	// FirstNewlyFailing names the fleet's first newly failing resources (at most 20).
	FirstNewlyFailing []previewResource `json:"firstNewlyFailing"`
	// FirstDiffering names resources the candidate and the running version judge differently,
	// with both verdicts (at most 20).
	FirstDiffering []previewDifference `json:"firstDiffering"`

	// generation and observed are the FleetPolicy's, for the table's note.
	generation, observed int64
}

// previewCluster is the preview in one cluster.
type previewCluster struct {
	Name string `json:"name"`
	// Reported: the cluster's agent reported the candidate's results; the counts are 0 until then.
	Reported          bool          `json:"reported"`
	Resources         int64         `json:"resources"`
	WouldFail         int64         `json:"wouldFail"`
	NewlyFailing      int64         `json:"newlyFailing"`
	Differ            int64         `json:"differ"`
	FirstNewlyFailing []resourceRef `json:"firstNewlyFailing,omitempty"`
}

// previewResource is a newly failing resource in a cluster.
type previewResource struct {
	Cluster    string `json:"cluster"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// previewDifference is a resource of a cluster the candidate (shadow) and the running version
// (live) judge differently.
type previewDifference struct {
	previewResource
	Shadow policyhubv1.Verdict `json:"shadow"`
	Live   policyhubv1.Verdict `json:"live"`
}

// buildPreviewReport is fp's preview, with each cluster's part from its state (its
// ClusterStatusSlices entry); clusters without a preview entry are not the preview's.
func buildPreviewReport(fp *policyhubv1.FleetPolicy, clusters []policyhubv1.ClusterStatus) *previewReport {
	r := &previewReport{FleetPolicy: fp.Name, PerCluster: []previewCluster{}, FirstNewlyFailing: []previewResource{}, FirstDiffering: []previewDifference{},
		generation: fp.Generation, observed: fp.Status.ObservedGeneration}
	if t, err := previewTargetOf(fp); err == nil {
		r.Candidate, r.CandidateRevision = t.candidate, t.revision
	}
	if fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil && fp.Spec.Preview == nil {
		r.Gate = fp.Spec.Rollout.PreviewGate.DeepCopy()
	}
	p := fp.Status.Preview
	if p == nil {
		return r
	}
	r.Revision, r.Shadow, r.StartedAt, r.CompletedAt = p.Revision, p.Shadow, p.StartedAt, p.CompletedAt
	r.Complete = p.CompletedAt != nil
	r.UpToDate = fp.Status.ObservedGeneration >= fp.Generation && p.Revision == r.CandidateRevision
	r.Clusters, r.Reported = p.Clusters, p.Reported
	r.Resources, r.WouldFail, r.NewlyFailing = p.Resources, p.WouldFail, p.NewlyFailing
	r.Same, r.Differ, r.OnlyShadow, r.OnlyLive = p.Same, p.Differ, p.OnlyShadow, p.OnlyLive
	for _, c := range clusters {
		if c.Preview == nil {
			continue
		}
		row := previewCluster{Name: c.Name, Reported: c.Preview.Reported}
		if row.Reported {
			row.Resources, row.WouldFail, row.NewlyFailing, row.Differ = c.Preview.Resources, c.Preview.WouldFail, c.Preview.NewlyFailing, c.Preview.Differing()
			for _, ref := range c.Preview.FirstNewlyFailing {
				row.FirstNewlyFailing = append(row.FirstNewlyFailing, toResourceRef(ref))
			}
		}
		r.PerCluster = append(r.PerCluster, row)
	}
	slices.SortFunc(r.PerCluster, func(a, b previewCluster) int {
		return cmp.Or(cmp.Compare(b.NewlyFailing, a.NewlyFailing), strings.Compare(a.Name, b.Name))
	})
	for _, cr := range p.FirstNewlyFailing {
		r.FirstNewlyFailing = append(r.FirstNewlyFailing, previewResource{Cluster: cr.Cluster, APIVersion: cr.Resource.APIVersion,
			Kind: cr.Resource.Kind, Namespace: cr.Resource.Namespace, Name: cr.Resource.Name})
	}
	for _, d := range p.FirstDiffering {
		r.FirstDiffering = append(r.FirstDiffering, previewDifference{Shadow: d.Shadow, Live: d.Live, previewResource: previewResource{Cluster: d.Cluster,
			APIVersion: d.Resource.APIVersion, Kind: d.Resource.Kind, Namespace: d.Resource.Namespace, Name: d.Resource.Name}})
	}
	return r
}

// parity is the candidate's verdicts compared with the running version's, "" when all are 0.
func (r *previewReport) parity() string {
	if r.Same == 0 && r.Differ == 0 && r.OnlyShadow == 0 && r.OnlyLive == 0 {
		return ""
	}
	return fmt.Sprintf("same %d, differ %d, only shadow %d, only live %d", r.Same, r.Differ, r.OnlyShadow, r.OnlyLive)
}

// printPreview prints the report as a header, a table of the clusters and the first newly
// failing resources; ages are taken at now.
func printPreview(w io.Writer, r *previewReport, now time.Time) {
	tableRow(w, "FleetPolicy:", r.FleetPolicy)
	tableRow(w, "Candidate:", fmt.Sprintf("revision %s, %s", r.CandidateRevision, r.Candidate))
	if g := r.Gate; g != nil {
		var bounds []string
		if g.MaxWouldFail != nil {
			bounds = append(bounds, fmt.Sprintf("would fail at most %d", *g.MaxWouldFail))
		}
		if g.MaxNewlyFailing != nil {
			bounds = append(bounds, fmt.Sprintf("newly failing at most %d", *g.MaxNewlyFailing))
		}
		if g.Parity != nil {
			bounds = append(bounds, fmt.Sprintf("each wave's clusters differ in at most %d (parity)", g.Parity.MaxDiffering))
		}
		tableRow(w, "Gate:", strings.Join(bounds, ", ")+" (spec.rollout.previewGate: the waves wait for it)")
	}
	if r.Revision == "" {
		tableRow(w, "Started:", fmt.Sprintf("not yet: the hub has not started the preview (status.observedGeneration %d, generation %d)", r.observed, r.generation))
		return
	}
	if !r.UpToDate {
		tableRow(w, "Note:", fmt.Sprintf("these results are of revision %s: the hub has not started the preview of revision %s yet (status.observedGeneration %d, generation %d)", r.Revision, r.CandidateRevision, r.observed, r.generation))
	}
	tableRow(w, "Shadow:", r.Shadow)
	tableRow(w, "Started:", ago(r.StartedAt, now))
	if r.Complete {
		tableRow(w, "Completed:", fmt.Sprintf("%s (%d of %s reported)", ago(r.CompletedAt, now), r.Reported, clustersText(r.Clusters)))
	} else {
		tableRow(w, "Reported:", fmt.Sprintf("%d of %s reported (not complete: the totals are theirs)", r.Reported, clustersText(r.Clusters)))
	}
	tableRow(w, "Would fail:", itoa(r.WouldFail))
	tableRow(w, "Newly failing:", itoa(r.NewlyFailing))
	tableRow(w, "Resources:", itoa(r.Resources))
	if parity := r.parity(); parity != "" {
		tableRow(w, "Parity:", parity)
	}
	if len(r.PerCluster) > 0 {
		fmt.Fprintln(w)
		tableRow(w, "CLUSTER", "REPORTED", "RESOURCES", "WOULD-FAIL", "NEWLY-FAILING", "DIFFER", "FIRST NEWLY FAILING")
		for _, c := range r.PerCluster {
			if !c.Reported {
				tableRow(w, c.Name, "no", "-", "-", "-", "-", "-")
				continue
			}
			tableRow(w, c.Name, "yes", itoa(c.Resources), itoa(c.WouldFail), itoa(c.NewlyFailing), itoa(c.Differ), namedResources(c.FirstNewlyFailing, c.NewlyFailing))
		}
	}
	if len(r.FirstNewlyFailing) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "First newly failing:")
		tableRow(w, "CLUSTER", "NAMESPACE", "KIND", "NAME")
		for _, res := range r.FirstNewlyFailing {
			tableRow(w, res.Cluster, res.Namespace, res.Kind, res.Name)
		}
		if more := r.NewlyFailing - int64(len(r.FirstNewlyFailing)); more > 0 {
			fmt.Fprintf(w, "(and %d more not named: the status names the first %d)\n", more, policyhubv1.MaxPreviewNamed)
		}
	}
	if len(r.FirstDiffering) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "First judged differently (candidate / running version):")
		tableRow(w, "CLUSTER", "NAMESPACE", "KIND", "NAME", "CANDIDATE", "RUNNING")
		for _, d := range r.FirstDiffering {
			tableRow(w, d.Cluster, d.Namespace, d.Kind, d.Name, string(d.Shadow), string(d.Live))
		}
	}
}

// clustersText is "1 cluster" or "N clusters".
func clustersText(n int32) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

// namedResources is a cluster's named newly failing resources, with how many more there are.
func namedResources(named []resourceRef, total int64) string {
	parts := make([]string, 0, len(named)+1)
	for _, r := range named {
		parts = append(parts, r.String())
	}
	if more := total - int64(len(named)); more > 0 && len(named) > 0 {
		parts = append(parts, fmt.Sprintf("+%d more", more))
	}
	return strings.Join(parts, ", ")
}

// ago is a time's age, "-" when there is none.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return humanAge(t, now) + " ago"
}

// previewVerdict judges a preview against --max-would-fail (nil: not given): an error wrapping
// errFindings (exit 1) when a complete, up-to-date preview has more would-fail resources, with
// the message to print; a plain error when it cannot be judged yet.
func previewVerdict(r *previewReport, maxWouldFail *int64) (string, error) {
	if maxWouldFail == nil {
		return "", nil
	}
	switch {
	case r.Revision == "" || !r.UpToDate:
		return "", fmt.Errorf("--max-would-fail: the preview of FleetPolicy %s is not started for revision %s yet: add --wait to wait for it", r.FleetPolicy, r.CandidateRevision)
	case !r.Complete:
		return "", fmt.Errorf("--max-would-fail: the preview of FleetPolicy %s is not complete (%d of %d clusters reported): add --wait to wait for it", r.FleetPolicy, r.Reported, r.Clusters)
	case r.WouldFail > *maxWouldFail:
		return fmt.Sprintf("preview gate failed: the candidate (revision %s) of FleetPolicy %s would fail %d resources over %d clusters (%d newly failing), more than --max-would-fail %d",
			r.Revision, r.FleetPolicy, r.WouldFail, r.Clusters, r.NewlyFailing, *maxWouldFail), fmt.Errorf("preview over --max-would-fail: %w", errFindings)
	}
	return "", nil
}
