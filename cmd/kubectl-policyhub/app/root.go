package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/internal/buildinfo"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFindings = 1 // violations or denials found
	ExitError    = 2 // usage or runtime error
)

// Streams are the command's input and outputs.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// errFindings makes Run exit 1 after the command printed its report.
var errFindings = errors.New("violations or denials found")

// options are the flags every command shares.
type options struct {
	streams Streams
	config  *genericclioptions.ConfigFlags
	output  string
	// secretNamespace is cluster-gateway's credential-secret namespace on the hub.
	secretNamespace string
	hubID           string
	// hubNamespace is the hub's own namespace on the hub: its id and replicas are read there only.
	hubNamespace string
}

// Run runs kubectl-policyhub with args and returns the exit code.
func Run(ctx context.Context, args []string, streams Streams) int {
	// Everything to stderr (warnings, progress, errors) may quote a cluster: terminal-safe.
	errOut := newSafeWriter(streams.ErrOut, "\t\n")
	defer errOut.Flush()
	streams.ErrOut = errOut
	config := genericclioptions.NewConfigFlags(true)
	// --cluster names a managed cluster in this plugin (sync, check); the hub is chosen with
	// --context or --kubeconfig.
	config.ClusterName = nil
	o := &options{streams: streams, config: config}
	root := newRootCommand(o)
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFindings):
		return ExitFindings
	default:
		fmt.Fprintf(streams.ErrOut, "error: %s\n", oneLine(explain(err)))
		return ExitError
	}
}

func newRootCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-policyhub",
		Short: "Kyverno policies across a fleet of clusters: status, results, dry-runs, pre-deploy checks, previews and rollouts",
		Long: `kubectl policyhub talks to the policyhub hub (your current kubeconfig context) and, through
cluster-gateway, to the managed clusters.

Exit codes: 0 ok, 1 violations or denials found (or a preview over --max-would-fail), 2 usage or runtime error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints it.
		Version: buildinfo.Get().String(),
	}
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "Output format: table, json or yaml.")
	root.PersistentFlags().StringVar(&o.secretNamespace, "gateway-secret-namespace", gateway.DefaultSecretNamespace, "Namespace of cluster-gateway's cluster credential Secrets on the hub.")
	root.PersistentFlags().StringVar(&o.hubID, "hub-id", "", "The hub's id (policyhub-hub --hub-id): the managed-by label of the objects it owns in the clusters. Default: the id the hub publishes (ConfigMap policyhub-hub-info in --hub-namespace), else policyhub.")
	root.PersistentFlags().StringVar(&o.hubNamespace, "hub-namespace", policyhubv1.DefaultHubNamespace, "The hub's own namespace on the hub (policyhub-hub --leader-election-namespace; the chart's release namespace): the hub's id, replicas and policy libraries are read there, and nowhere else.")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch o.output {
		case "table", "json", "yaml":
			return nil
		}
		return usageError{fmt.Errorf("-o %q: choose table, json or yaml", o.output)}
	}
	for _, add := range commands {
		root.AddCommand(add(o))
	}
	return root
}

// commands are added by each command's file (init), so the files stay independent.
var commands []func(*options) *cobra.Command

// usageError is a mistake in the command line.
type usageError struct{ error }

// hubConfig is the hub's rest.Config from the kubeconfig flags.
func (o *options) hubConfig() (*rest.Config, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// hubClient is a client of the hub that knows policyhub's API.
func (o *options) hubClient() (client.Client, error) {
	cfg, err := o.hubConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The OCM kinds the inventory reads typed.
	if err := placement.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// namespace is the -n flag, else the kubeconfig context's namespace, else "default".
func (o *options) namespace() string {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// explain turns the errors people meet into a sentence that says what to do.
func explain(err error) string {
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return ue.Error() + " (see --help)"
	case meta.IsNoMatchError(err) || isMissingCRD(err):
		return "the hub does not serve policyhub.io/v1alpha1: is policyhub installed on this hub? (" + err.Error() + ")"
	case apierrors.IsForbidden(err):
		return "permission denied: " + err.Error()
	case apierrors.IsUnauthorized(err):
		return "the hub refused your credentials (check your kubeconfig): " + err.Error()
	}
	return err.Error()
}

func isMissingCRD(err error) bool {
	return apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
