package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
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
