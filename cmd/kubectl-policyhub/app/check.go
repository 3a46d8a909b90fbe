package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
)

func init() { commands = append(commands, newCheckCommand) }

const (
	// checkFieldManager is the field manager of check's dry-run applies.
	checkFieldManager = "kubectl-policyhub-check"
	// checkConcurrency bounds the dry-run requests in flight.
	checkConcurrency = 8
	// checkTimeout bounds every request to the cluster.
	checkTimeout = 30 * time.Second
)

// Results of one resource.
const (
	checkAllowed = "allowed"
	checkDenied  = "denied"
	checkError   = "error"
)

type checkOptions struct {
	*options
	files   []string
	cluster string
}

func newCheckCommand(o *options) *cobra.Command {
	co := &checkOptions{options: o}
	cmd := &cobra.Command{
		Use:   "check -f FILE|- --cluster C [-n NS]",
		Short: "Pre-deploy check: server-side dry-run of manifests in a cluster; prints Kyverno's denials and warnings",
		Long: `check sends every manifest of the input (multi-document YAML or JSON; a List is expanded) to the
cluster through cluster-gateway as a server-side apply with dryRun=All (field manager
kubectl-policyhub-check, forced): admission runs — Kyverno's included — and nothing is created or
changed. Namespaced objects without a namespace get -n's (default the context's). For each resource
it prints allowed, denied (with the API server's or Kyverno's message) or error (could not be
checked, e.g. a kind the cluster does not serve), and the warnings the cluster returned.

Exit codes: 0 everything would be admitted; 1 something would be denied; 2 usage or runtime error:
no input, an unknown or unreachable cluster, or a resource that could not be checked.`,
		Example: `  # Would prod-1's Kyverno admit these manifests?
  kubectl policyhub check -f deploy.yaml --cluster prod-1 -n shop

  # From a pipeline, as JSON
  helm template shop ./chart | kubectl policyhub check -f - --cluster prod-1 -n shop -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("check takes no arguments (got %q): give the manifests with -f", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return co.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&co.files, "filename", "f", nil, "Manifests to check: a file, a directory (its .yaml, .yml and .json files) or - for stdin; repeatable.")
	f.StringVar(&co.cluster, "cluster", "", "The managed cluster to check the manifests against (required).")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("cluster", syncCompleteClusters(o))
	return cmd
}

type checkReport struct {
	Cluster   string        `json:"cluster"`
	Resources []checkResult `json:"resources"`
	Summary   checkSummary  `json:"summary"`
}

type checkResult struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Result is allowed, denied or error.
	Result string `json:"result"`
	// Message is the denial (the API error's message: Kyverno's for its denials) or the error.
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

type checkSummary struct {
	Allowed int `json:"allowed"`
	Denied  int `json:"denied"`
	Errors  int `json:"errors"`
	// Warnings counts the resources with at least one warning.
	Warnings int `json:"warnings"`
}

func (co *checkOptions) run(ctx context.Context) error {
	if len(co.files) == 0 {
		return usageError{errors.New("-f is required: the manifests to check (a file, a directory, or - for stdin)")}
	}
	if co.cluster == "" {
		return usageError{errors.New("--cluster is required: the cluster whose admission checks the manifests")}
	}
	objs, err := checkRead(co.files, co.streams.In)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return usageError{fmt.Errorf("no objects in %s", strings.Join(co.files, ", "))}
	}
	hubCfg, err := co.hubConfig()
	if err != nil {
		return err
	}
	hub, err := co.hubClient()
	if err != nil {
		return err
	}
	inv, err := placement.ReadInventory(ctx, hub, co.secretNamespace)
	if err != nil {
		return fmt.Errorf("read the cluster inventory: %w", err)
	}
	if err := knownCluster(inv, co.cluster); err != nil {
		return err
	}
	cfg, err := gateway.ClusterConfig(hubCfg, co.cluster)
	if err != nil {
		return err
	}
	cfg.WarningHandlerWithContext = checkWarningHandler{}
	if cfg.Timeout == 0 {
		cfg.Timeout = checkTimeout
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return fmt.Errorf("cluster %s through cluster-gateway: %w", co.cluster, err)
		}
		return fmt.Errorf("cluster %s is unreachable through cluster-gateway: %w", co.cluster, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("client for cluster %s: %w", co.cluster, err)
	}

	report := checkAll(ctx, c, objs, co.namespace())
	report.Cluster = co.cluster
	if err := writeReport(co.streams.Out, co.output, report, func(w io.Writer) error { checkWriteTable(w, report); return nil }); err != nil {
		return err
	}
	switch {
	case report.Summary.Errors > 0:
		return fmt.Errorf("%d of %d resources could not be checked in cluster %s; see the report", report.Summary.Errors, len(report.Resources), co.cluster)
	case report.Summary.Denied > 0:
		return errFindings
	}
	return nil
}

// checkRead decodes every object of the inputs (files, directories, - for stdin), in order.
func checkRead(inputs []string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, in := range inputs {
		if in == "-" {
			if stdin == nil {
				return nil, usageError{errors.New("-f -: no standard input")}
			}
			got, err := checkDecode("stdin", stdin)
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
			continue
		}
		files := []string{in}
		info, err := os.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", in, err)
		}
		if info.IsDir() {
			entries, err := os.ReadDir(in)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", in, err)
			}
			files = nil
			for _, e := range entries {
				switch strings.ToLower(filepath.Ext(e.Name())) {
				case ".yaml", ".yml", ".json":
					if !e.IsDir() {
						files = append(files, filepath.Join(in, e.Name()))
					}
				}
			}
			sort.Strings(files)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", file, err)
			}
			got, err := checkDecode(file, bytes.NewReader(data))
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
		}
	}
	return objs, nil
}

// checkDecode reads a stream of YAML documents or JSON objects; empty documents are skipped and
// Lists expanded. Every object needs apiVersion, kind and a name.
func checkDecode(name string, r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		items := []*unstructured.Unstructured{obj}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
			}
			items = nil
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		}
		for _, item := range items {
			switch {
			case item.GetAPIVersion() == "" || item.GetKind() == "":
				return nil, fmt.Errorf("%s: document %d: an object needs apiVersion and kind", name, doc)
			case item.GetName() == "":
				return nil, fmt.Errorf("%s: document %d: %s needs metadata.name (a server-side apply cannot use generateName)", name, doc, item.GetKind())
			}
			objs = append(objs, item)
		}
	}
}

// checkAll dry-runs every object in the cluster, checkConcurrency at a time; the results keep the
// input's order.
func checkAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, namespace string) *checkReport {
	// Namespaces the input itself creates: a dry-run cannot check what goes into them.
	created := map[string]bool{}
	for _, obj := range objs {
		if obj.GroupVersionKind().Group == "" && obj.GetKind() == "Namespace" {
			created[obj.GetName()] = true
		}
	}
	report := &checkReport{Resources: make([]checkResult, len(objs))}
	sem := make(chan struct{}, checkConcurrency)
	var wg sync.WaitGroup
	for i, obj := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			report.Resources[i] = checkOne(ctx, c, obj.DeepCopy(), namespace, created)
		}()
	}
	wg.Wait()
	for _, r := range report.Resources {
		switch r.Result {
		case checkAllowed:
			report.Summary.Allowed++
		case checkDenied:
			report.Summary.Denied++
		default:
			report.Summary.Errors++
		}
		if len(r.Warnings) > 0 {
			report.Summary.Warnings++
		}
	}
	return report
}

// checkOne sends one object as a server-side apply with dryRun=All and says what admission made of it.
func checkOne(ctx context.Context, c client.Client, obj *unstructured.Unstructured, namespace string, created map[string]bool) checkResult {
	gvk := obj.GroupVersionKind()
	res := checkResult{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		res.Result = checkError
		if meta.IsNoMatchError(err) {
			res.Message = fmt.Sprintf("the cluster does not serve %s %s (is its CRD installed? a CRD in this same input is not created by a dry-run)", obj.GetAPIVersion(), obj.GetKind())
		} else {
			res.Message = err.Error()
		}
		return res
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
	} else {
		obj.SetNamespace("")
	}
	res.Namespace = obj.GetNamespace()
	obj.SetManagedFields(nil) // a server-side apply refuses them
	warnings := &checkWarnings{}
	err = c.Apply(context.WithValue(ctx, checkWarningsKey{}, warnings), client.ApplyConfigurationFromUnstructured(obj),
		client.DryRunAll, client.FieldOwner(checkFieldManager), client.ForceOwnership)
	res.Warnings = warnings.list()
	res.Result, res.Message = checkClassify(err, res.Namespace, created)
	return res
}

// checkClassify says what an apply's error means: nil is allowed; the cluster refusing the object
// (admission — Kyverno's denials — or validation) is denied, with the API error's message; the
// cluster failing to answer, or a namespace only the input creates, is an error.
func checkClassify(err error, namespace string, created map[string]bool) (string, string) {
	if err == nil {
		return checkAllowed, ""
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return checkError, err.Error()
	}
	s := status.Status()
	msg := strings.TrimSpace(s.Message)
	if msg == "" {
		msg = err.Error()
	}
	switch {
	case apierrors.IsNotFound(err) && s.Details != nil && s.Details.Kind == "namespaces" && created[s.Details.Name]:
		return checkError, fmt.Sprintf("namespace %s does not exist yet: the input creates it, and a dry-run cannot check what goes into it (%s)", namespace, msg)
	case s.Code >= 500, apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
		return checkError, msg
	}
	return checkDenied, msg
}

// Warnings: the cluster's warning headers, recorded per request (the request's context carries
// where they go).

type checkWarningsKey struct{}

type checkWarnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *checkWarnings) add(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.texts {
		if t == text {
			return
		}
	}
	w.texts = append(w.texts, text)
}

func (w *checkWarnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.texts...)
}

// checkWarningHandler is the rest.WarningHandlerWithContext that files each warning under its request.
type checkWarningHandler struct{}

var _ rest.WarningHandlerWithContext = checkWarningHandler{}

func (checkWarningHandler) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	if w, ok := ctx.Value(checkWarningsKey{}).(*checkWarnings); ok {
		w.add(text)
	}
}

func checkWriteTable(w io.Writer, r *checkReport) {
	rows := [][]string{{"RESULT", "KIND", "NAMESPACE", "NAME"}}
	for _, res := range r.Resources {
		rows = append(rows, []string{res.Result, res.Kind, res.Namespace, res.Name})
	}
	lines := syncColumns("", rows)
	fmt.Fprintln(w, lines[0])
	for i, res := range r.Resources {
		fmt.Fprintln(w, lines[i+1])
		if res.Message != "" {
			syncIndent(w, "    ", res.Message)
		}
		for _, warning := range res.Warnings {
			syncIndent(w, "    ", "warning: "+warning)
		}
	}
	s := r.Summary
	fmt.Fprintf(w, "\n%s checked in cluster %s with a server-side dry-run (nothing was created): %d allowed, %d denied, %d could not be checked, %d with warnings.\n",
		syncPlural(len(r.Resources), "resource"), cellText(r.Cluster), s.Allowed, s.Denied, s.Errors, s.Warnings)
}
