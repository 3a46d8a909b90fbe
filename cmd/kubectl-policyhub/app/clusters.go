package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/shard"
)

func init() { commands = append(commands, newClustersCommand) }

const (
	// probeTimeout bounds each request of a cluster's probe through the gateway.
	probeTimeout = 5 * time.Second
	// probeConcurrency is how many clusters are probed at once.
	probeConcurrency = 16
)

// kyvernoPolicyAPIs are the policy APIs whose presence `clusters` reports, in this order.
var kyvernoPolicyAPIs = []string{"kyverno.io/v1", "kyverno.io/v2", "policies.kyverno.io/v1beta1", "policies.kyverno.io/v1"}

// clustersReport is the -o json|yaml output of `clusters`.
type clustersReport struct {
	Clusters []clusterReport `json:"clusters"`
}

// clusterReport is one managed cluster.
type clusterReport struct {
	// Name of the cluster, as registered with cluster-gateway.
	Name string `json:"name"`
	// Labels of the cluster (its gateway credential Secret's, over its OCM ManagedCluster's).
	Labels map[string]string `json:"labels"`
	// Reachable is true when the cluster answered GET /version through the gateway.
	Reachable bool `json:"reachable"`
	// Version is the cluster's Kubernetes version (gitVersion), when reachable.
	Version string `json:"version,omitempty"`
	// Error says why the cluster is unreachable (or why its APIs could not be read).
	Error string `json:"error,omitempty"`
	// KyvernoAPIs are the Kyverno policy APIs the cluster serves, among kyverno.io/v1,
	// kyverno.io/v2, policies.kyverno.io/v1beta1 and policies.kyverno.io/v1; null when the
	// cluster could not be asked.
	KyvernoAPIs []string `json:"kyvernoAPIs"`
	// Summary is the cluster's last PolicyReportSummary on the hub; null when its agent sent none.
	Summary *clusterSummary `json:"summary"`
	// Replica is the hub replica that works the cluster when the hub's replicas share the fleet;
	// absent otherwise (or when the replicas' Leases may not be read).
	Replica string `json:"replica,omitempty"`
}

// clusterSummary is what `clusters` shows of a cluster's PolicyReportSummary.
type clusterSummary struct {
	// GeneratedAt is when the agent built the summary, by the cluster's clock.
	GeneratedAt *metav1.Time `json:"generatedAt"`
	// AgeSeconds is how long ago the hub saw the summary, by the hub's clock.
	AgeSeconds int64 `json:"ageSeconds"`
	// Stale is true when the agent missed three heartbeats: the results may be out of date.
	Stale bool `json:"stale"`
	// dated: the hub can tell when it saw the summary (AgeSeconds means something).
	dated bool
	// Results counts every result in the cluster.
	Results reportCounts `json:"results"`
	// Violations is results.fail + results.error.
	Violations int64 `json:"violations"`
	// Blocked counts admissions Kyverno refused in the cluster.
	Blocked int64 `json:"blocked"`
	// KyvernoWebhooks is true when the agent saw Kyverno's admission webhooks registered.
	KyvernoWebhooks bool `json:"kyvernoWebhooks"`
	// ReportAPIs are the report APIs the cluster serves.
	ReportAPIs []string `json:"reportAPIs"`
	// PolicyAPIs are the Kyverno policy group/versions the agent found served.
	PolicyAPIs []string `json:"policyAPIs"`
	// Kyverno is what the cluster's Kyverno says of itself; null when the agent found no
	// Kyverno admission controller (or is older than these facts).
	Kyverno *kyvernoReport `json:"kyverno"`
	// LegacyObjects counts the cluster's Kyverno legacy objects, owned by policyhub or not (see
	// `kubectl policyhub inventory`); null when the agent sent no inventory.
	LegacyObjects *int64 `json:"legacyObjects"`
	// Engines are the policy engines the cluster runs (Kyverno, Kubernetes: the API server's own
	// admission policies, Gatekeeper); null from an agent older than the field.
	Engines []string `json:"engines"`
	// Gatekeeper is what the cluster's Gatekeeper says of itself; null when it runs none.
	Gatekeeper *policyhubv1.GatekeeperFacts `json:"gatekeeper"`
	// AdmissionPolicies is what the agent reads of the API server's own admission policies:
	// whether it evaluates existing resources, whether it counts refusals; null when unknown.
	AdmissionPolicies *policyhubv1.AdmissionPolicyFacts `json:"admissionPolicies"`
	// Pacing is what the hub asks of the cluster's agent (its summary's status.pacing); null
	// when the hub published none.
	Pacing *pacingReport `json:"pacing"`
}

// kyvernoReport is what a cluster's Kyverno says of itself, as its agent reported it.
type kyvernoReport struct {
	// Version of Kyverno's admission controller; "" when the agent could not tell.
	Version string `json:"version"`
	// VersionSource says where the agent read the version.
	VersionSource string `json:"versionSource"`
	// EnforcesLegacy is "yes" when the version still executes the legacy kinds (before 1.20),
	// "no" from 1.20, "unknown" when the version does not say.
	EnforcesLegacy string `json:"enforcesLegacy"`
	// PolicyExceptions is Kyverno's --enablePolicyException; null when unknown.
	PolicyExceptions *bool `json:"policyExceptions"`
	// ExceptionNamespace is Kyverno's --exceptionNamespace ("" when exceptions are read from
	// every namespace).
	ExceptionNamespace string `json:"exceptionNamespace"`
	// ReportedResults are the results Kyverno writes (its --allowedResults); null when every
	// kind: a kind left out is unknown, never 0.
	ReportedResults []string `json:"reportedResults"`
	// ExceptionBypass is what the version lets through its exception settings (Kyverno 1.19.0,
	// kyverno#17367); omitted when nothing known.
	ExceptionBypass string `json:"exceptionBypass,omitempty"`
}

// toKyvernoReport is what `clusters` shows of a cluster's Kyverno facts (nil: none reported).
func toKyvernoReport(k *policyhubv1.KyvernoFacts) *kyvernoReport {
	if k == nil {
		return nil
	}
	return &kyvernoReport{Version: k.Version, VersionSource: k.VersionSource, EnforcesLegacy: enforcesLegacy(k.Version),
		PolicyExceptions: k.PolicyExceptions, ExceptionNamespace: k.ExceptionNamespace, ReportedResults: slices.Clone(k.ReportedResults),
		ExceptionBypass: policyhubv1.KyvernoExceptionBypass(k.Version)}
}

// enforcesLegacy says whether a Kyverno of version executes the legacy kinds: yes, no or unknown.
func enforcesLegacy(version string) string {
	enforces, known := policyhubv1.KyvernoEnforcesLegacy(version)
	switch {
	case !known:
		return "unknown"
	case enforces:
		return "yes"
	}
	return "no"
}

// exceptionsCell is Kyverno's exception settings as one table cell: off, on (every namespace),
// on(ns=NAME), or <unknown>.
func exceptionsCell(k *kyvernoReport) string {
	switch {
	case k == nil || k.PolicyExceptions == nil:
		return "<unknown>"
	case !*k.PolicyExceptions:
		return "off"
	case k.ExceptionNamespace != "" && k.ExceptionBypass != "":
		// Kyverno 1.19.0 does not hold CEL exceptions to the namespace (see ExceptionBypass).
		return "on(ns=" + k.ExceptionNamespace + ", bypassed: kyverno#17367)"
	case k.ExceptionNamespace != "":
		return "on(ns=" + k.ExceptionNamespace + ")"
	}
	return "on"
}

func newClustersCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "clusters [CLUSTER...]",
		Short: "List the fleet's clusters: labels, reachability, Kyverno APIs, last summary, violations",
		Long: `List every managed cluster of the hub's inventory (cluster-gateway's credential Secrets and
OCM ManagedClusters) with its labels; whether it answers through cluster-gateway (GET /version,
5s timeout; clusters are probed concurrently); which Kyverno policy APIs it serves (kyverno.io/v1, kyverno.io/v2,
policies.kyverno.io/v1beta1, policies.kyverno.io/v1); what its agent last reported of its Kyverno
(version, whether that version still enforces the legacy kyverno.io kinds: yes before 1.20, no
from 1.20, unknown when the version does not say; --enablePolicyException and
--exceptionNamespace; a warning for Kyverno 1.19.0, which honours exceptions outside that
namespace, kyverno#17367) and how many legacy objects it holds (see kubectl policyhub inventory); the age of the last PolicyReportSummary its agent sent ("stale" when the
agent missed three heartbeats, by the longer of the agent's heartbeat and the one the hub asks of it);
PACING, what the hub asks of the agent so the fleet's writes fit its API server (push interval/heartbeat,
e.g. 10s/1m; see Pacing in docs/hub.md; <none> when the hub published none); and the cluster's
violations (fail, error) and blocked admissions.

An unreachable cluster is a row, not an error: the command exits 0 whatever the clusters' state.
Naming clusters restricts the list to them; an unknown name is an error.

-o json|yaml prints {"clusters": [{"name", "labels", "reachable", "version", "error",
"kyvernoAPIs", "summary": {"generatedAt", "ageSeconds", "stale", "results": {"pass", "fail",
"warn", "error", "skip"}, "violations", "blocked", "kyvernoWebhooks", "reportAPIs", "policyAPIs",
"kyverno": {"version", "versionSource", "enforcesLegacy", "policyExceptions", "exceptionNamespace",
"reportedResults"} | null, "legacyObjects", "engines", "gatekeeper": {"version", "versionSource",
"webhook"} | null, "admissionPolicies": {"evaluated", "refusalsCounted", "refusalsNotCounted"} |
null, "pacing": {"pushInterval", "heartbeatInterval"} | null} | null, "replica"}]}. A result kind the cluster's Kyverno does not write (its
--allowedResults, kyverno.reportedResults) is null, never 0. ENGINES lists the policy engines
the cluster's agent found: Kyverno, Kubernetes (the API server's own admission policies) and
Gatekeeper (with its version).

When the hub's replicas share the fleet (policyhub-hub --share-fleet), a REPLICA column names
the replica that works each cluster, computed as the replicas compute it from their live Leases;
"<none>" for a cluster without a gateway credential Secret (an OCM ManagedCluster alone). A cluster's gateway Secret labelled
policyhub.io/hub-replica=<replica> is pinned there while that replica runs.`,
		Example: `  # Every cluster of the fleet
  kubectl policyhub clusters

  # Two clusters, as JSON
  kubectl policyhub clusters cluster-1 cluster-2 -o json

  # The clusters that do not answer
  kubectl policyhub clusters -o json | jq -r '.clusters[] | select(.reachable | not) | .name'`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			names, _ := o.clusterNames(cmd.Context())
			return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(args, n) }), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := o.clusters(cmd.Context(), args, time.Now())
			if err != nil {
				return err
			}
			for _, c := range report.Clusters {
				if !c.Reachable {
					fmt.Fprintf(o.streams.ErrOut, "warning: cluster %s is unreachable through cluster-gateway: %s\n", c.Name, c.Error)
				}
				if s := c.Summary; s != nil && s.Kyverno != nil && s.Kyverno.ExceptionBypass != "" {
					fmt.Fprintf(o.streams.ErrOut, "warning: cluster %s: %s\n", c.Name, s.Kyverno.ExceptionBypass)
				}
			}
			if err := o.printReport(report, func(w io.Writer) error {
				printClustersTable(w, report)
				return nil
			}); err != nil {
				return err
			}
			if len(report.Clusters) == 0 && o.output == "table" {
				fmt.Fprintf(o.streams.ErrOut, "No clusters found: no cluster-gateway credential Secret in %s and no OCM ManagedCluster.\n", o.secretNamespace)
			}
			return nil
		},
	}
}

// clusterNames are the inventory's cluster names, for completion.
func (o *options) clusterNames(ctx context.Context) ([]string, error) {
	c, err := o.hubClient()
	if err != nil {
		return nil, err
	}
	inv, err := placement.ReadInventory(ctx, c, o.secretNamespace)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, cl := range inv.Clusters {
		names = append(names, cl.Name)
	}
	return names, nil
}

// clusters builds the report of the named clusters (every cluster when none is named).
func (o *options) clusters(ctx context.Context, names []string, now time.Time) (*clustersReport, error) {
	cfg, err := o.hubConfig()
	if err != nil {
		return nil, err
	}
	c, err := o.hubClient()
	if err != nil {
		return nil, err
	}
	summaries, live, inv, err := o.hubFleet(ctx, c, now)
	if err != nil {
		return nil, err
	}
	clusters := inv.Clusters
	if len(names) > 0 {
		known := map[string]placement.Cluster{}
		for _, cl := range inv.Clusters {
			known[cl.Name] = cl
		}
		clusters = nil
		for _, name := range names {
			cl, ok := known[name]
			if !ok {
				return nil, knownCluster(inv, name)
			}
			if !slices.ContainsFunc(clusters, func(c placement.Cluster) bool { return c.Name == name }) {
				clusters = append(clusters, cl)
			}
		}
		slices.SortFunc(clusters, func(a, b placement.Cluster) int { return strings.Compare(a.Name, b.Name) })
	}

	owners := o.replicaOwners(ctx, c, now)
	report := &clustersReport{Clusters: make([]clusterReport, len(clusters))}
	probes := make([]probeResult, len(clusters))
	var g errgroup.Group
	g.SetLimit(probeConcurrency)
	for i, cl := range clusters {
		g.Go(func() error {
			probes[i] = probeCluster(ctx, cfg, cl.Name)
			return nil
		})
	}
	_ = g.Wait() // a probe records its error; it never fails the command
	for i, cl := range clusters {
		r := clusterReport{Name: cl.Name, Labels: cl.Labels, Reachable: probes[i].reachable, Version: probes[i].version,
			Error: probes[i].err, KyvernoAPIs: probes[i].kyvernoAPIs}
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		if s, ok := summaries[cl.Name]; ok {
			r.Summary = toClusterSummary(s, live, now)
		}
		r.Replica = owners.Owner(cl.Name)
		report.Clusters[i] = r
	}
	return report, nil
}

// replicaOwners is how the hub's replicas share the fleet now, as they compute it (shard.Assign)
// from their live Leases (by their own renewTime) and the credential Secrets: empty when the
// replicas do not share it, or their Leases may not be read (the column is then left out). Only
// the Leases in the hub's own namespace (--hub-namespace) count, as only those count for the hub:
// a Lease someone labels elsewhere is no replica.
func (o *options) replicaOwners(ctx context.Context, c client.Client, now time.Time) shard.Assignment {
	if err := o.resolveHubID(ctx, c); err != nil {
		return shard.Assignment{}
	}
	list := &coordinationv1.LeaseList{}
	if err := c.List(ctx, list, client.InNamespace(o.hubNamespace), client.MatchingLabels{policyhubv1.LabelReplicaOf: o.hubID}); err != nil {
		return shard.Assignment{}
	}
	live := shard.LiveAt(o.hubID, list.Items, now)
	if len(live) == 0 {
		return shard.Assignment{}
	}
	secrets, err := placement.CredentialSecrets(ctx, c, o.secretNamespace)
	if err != nil {
		return shard.Assignment{}
	}
	return shard.Assign(shard.FromSecrets(secrets), live, 0)
}

// clusterSummaries reads every cluster's PolicyReportSummary on the hub, by cluster (the
// namespace); only those the hub aggregates: named policyhubv1.SummaryName, claiming the
// cluster of their namespace, and within the CRD's rules (an older CRD may let others in).
// hubFleet reads what the hub knows of the fleet: the clusters' summaries, their agents'
// liveness and the cluster inventory. The summaries first: listing them is also the check that
// policyhub is installed on the hub.
func (o *options) hubFleet(ctx context.Context, c client.Client, now time.Time) (map[string]*policyhubv1.PolicyReportSummary, liveness, placement.Inventory, error) {
	summaries, err := clusterSummaries(ctx, c)
	if err != nil {
		return nil, liveness{}, placement.Inventory{}, err
	}
	live, err := agentLiveness(ctx, c, now)
	if err != nil {
		return nil, liveness{}, placement.Inventory{}, err
	}
	inv, err := placement.ReadInventory(ctx, c, o.secretNamespace)
	if err != nil {
		return nil, liveness{}, placement.Inventory{}, err
	}
	return summaries, live, inv, nil
}

func clusterSummaries(ctx context.Context, c client.Client) (map[string]*policyhubv1.PolicyReportSummary, error) {
	list := &policyhubv1.PolicyReportSummaryList{}
	if err := c.List(ctx, list, client.MatchingFields{"metadata.name": policyhubv1.SummaryName}); err != nil {
		return nil, fmt.Errorf("list PolicyReportSummaries: %w", err)
	}
	out := map[string]*policyhubv1.PolicyReportSummary{}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Accepted() != nil || s.Spec.Validate() != nil {
			continue
		}
		out[s.Namespace] = s
	}
	return out, nil
}

// toClusterSummary is what `clusters` shows of a summary: its age and staleness by the hub's
// clock (when the hub saw it or its agent's Lease renewed), never by the cluster's.
func toClusterSummary(s *policyhubv1.PolicyReportSummary, live liveness, now time.Time) *clusterSummary {
	results := summaryCounts(s, s.Spec.Totals)
	out := &clusterSummary{
		GeneratedAt: s.Spec.GeneratedAt, AgeSeconds: int64(live.age(s, now).Seconds()), Stale: live.stale(s, now),
		Results: results, Violations: results.violations(), Blocked: s.Spec.Blocked,
		KyvernoWebhooks: s.Spec.Engine.KyvernoWebhooks, ReportAPIs: slices.Clone(s.Spec.Engine.ReportAPIs),
		PolicyAPIs: slices.Sorted(slices.Values(s.Spec.Engine.PolicyAPIs)), Kyverno: toKyvernoReport(s.Spec.Engine.Kyverno),
		Gatekeeper: s.Spec.Engine.Gatekeeper, AdmissionPolicies: s.Spec.Engine.AdmissionPolicies, Pacing: toPacingReport(s.Status.Pacing),
	}
	if s.Spec.Engine.Engines != nil {
		out.Engines = []string{}
		for _, e := range s.Spec.Engine.Engines {
			out.Engines = append(out.Engines, string(e))
		}
	}
	if s.Spec.Engine.Legacy != nil {
		total := s.Spec.Engine.Legacy.Total()
		out.LegacyObjects = &total
	}
	if out.PolicyAPIs == nil {
		out.PolicyAPIs = []string{}
	}
	if at, _ := aggregate.ObservedAt(s, now); !at.IsZero() {
		out.dated = true
	}
	if out.ReportAPIs == nil {
		out.ReportAPIs = []string{}
	}
	slices.Sort(out.ReportAPIs)
	return out
}

// probeResult is what a cluster answered through the gateway.
type probeResult struct {
	reachable   bool
	version     string
	kyvernoAPIs []string
	err         string
}

// probeCluster asks the cluster, through the gateway, for its version (reachability) and its API
// groups (Kyverno's policy APIs), each request within probeTimeout.
func probeCluster(ctx context.Context, hub *rest.Config, cluster string) probeResult {
	cfg, err := gateway.ClusterConfig(hub, cluster)
	if err != nil {
		return probeResult{err: err.Error()}
	}
	cfg.Timeout = probeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return probeResult{err: err.Error()}
	}
	get := func(path string, into any) error {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		body, err := dc.RESTClient().Get().AbsPath(path).Do(ctx).Raw()
		if err != nil {
			return err
		}
		return json.Unmarshal(body, into)
	}
	var v version.Info
	if err := get("/version", &v); err != nil {
		return probeResult{err: oneLine(err.Error())}
	}
	res := probeResult{reachable: true, version: v.GitVersion}
	var groups metav1.APIGroupList
	if err := get("/apis", &groups); err != nil {
		res.err = "read the cluster's API groups: " + oneLine(err.Error())
		return res
	}
	res.kyvernoAPIs = servedKyvernoAPIs(groups)
	return res
}

// servedKyvernoAPIs are the kyvernoPolicyAPIs among the served group versions.
func servedKyvernoAPIs(groups metav1.APIGroupList) []string {
	served := map[string]bool{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[v.GroupVersion] = true
		}
	}
	out := []string{}
	for _, gv := range kyvernoPolicyAPIs {
		if served[gv] {
			out = append(out, gv)
		}
	}
	return out
}

// engineCell lists the engines a cluster runs, Gatekeeper with its version where known, e.g.
// "Kyverno,Kubernetes" or "Kubernetes,Gatekeeper(v3.23.1)"; <none> when it runs none.
func engineCell(s *clusterSummary) string {
	cells := make([]string, 0, len(s.Engines))
	for _, e := range s.Engines {
		if e == string(policyhubv1.EngineGatekeeper) && s.Gatekeeper != nil && s.Gatekeeper.Version != "" {
			e += "(" + s.Gatekeeper.Version + ")"
		}
		cells = append(cells, e)
	}
	return listString(cells)
}

func printClustersTable(w io.Writer, report *clustersReport) {
	if len(report.Clusters) == 0 {
		return
	}
	shared := slices.ContainsFunc(report.Clusters, func(c clusterReport) bool { return c.Replica != "" })
	header := []string{"CLUSTER", "REACHABLE", "VERSION", "ENGINES", "KYVERNO", "KYVERNO-VERSION", "LEGACY-ENFORCED", "EXCEPTIONS", "LEGACY",
		"SUMMARY-AGE", "PACING", "FAIL", "ERROR", "BLOCKED", "LABELS"}
	if shared {
		header = slices.Insert(header, 1, "REPLICA")
	}
	tableRow(w, header...)
	for _, c := range report.Clusters {
		reachable, kyverno := "yes", listString(c.KyvernoAPIs)
		if !c.Reachable {
			reachable = "no"
		}
		if c.KyvernoAPIs == nil {
			kyverno = "<unknown>"
		}
		age, pacing, fail, errs, blocked, engines := "<none>", "-", "-", "-", "-", "<unknown>"
		kyvernoVersion, legacyEnforced, exceptions, legacy := "<unknown>", "unknown", "<unknown>", "<unknown>"
		if s := c.Summary; s != nil {
			if k := s.Kyverno; k != nil {
				kyvernoVersion, legacyEnforced, exceptions = cmp.Or(k.Version, "<unknown>"), k.EnforcesLegacy, exceptionsCell(k)
			}
			if s.LegacyObjects != nil {
				legacy = itoa(*s.LegacyObjects)
			}
			age = "<unknown>"
			if s.dated {
				age = duration.HumanDuration(time.Duration(s.AgeSeconds) * time.Second)
			}
			if s.Stale {
				age += " (stale)"
			}
			pacing = pacingCell(s.Pacing)
			fail, errs, blocked = s.Results.cell("fail"), s.Results.cell("error"), itoa(s.Blocked)
			if s.Engines != nil {
				engines = engineCell(s)
			}
		}
		row := []string{c.Name, reachable, c.Version, engines, kyverno, kyvernoVersion, legacyEnforced, exceptions, legacy,
			age, pacing, fail, errs, blocked, labelString(c.Labels)}
		if shared {
			replica := c.Replica
			if replica == "" {
				replica = "<none>"
			}
			row = slices.Insert(row, 1, replica)
		}
		tableRow(w, row...)
	}
}

// pacingReport is what the hub asks of a cluster's agent so the fleet's writes fit its API server.
type pacingReport struct {
	// PushInterval is the least time between two pushes of a change of pass, warn or skip counts.
	PushInterval metav1.Duration `json:"pushInterval"`
	// HeartbeatInterval is how often the agent renews its Lease.
	HeartbeatInterval metav1.Duration `json:"heartbeatInterval"`
}

// toPacingReport is what `clusters` shows of a summary's pacing (nil: none published).
func toPacingReport(p *policyhubv1.SummaryPacing) *pacingReport {
	if p == nil {
		return nil
	}
	return &pacingReport{PushInterval: p.PushInterval, HeartbeatInterval: p.HeartbeatInterval}
}

// pacingCell is the pacing the hub asks of an agent as push interval/heartbeat, e.g. 10s/1m;
// <none> when it asks none.
func pacingCell(p *pacingReport) string {
	if p == nil {
		return "<none>"
	}
	return shortDuration(p.PushInterval.Duration) + "/" + shortDuration(p.HeartbeatInterval.Duration)
}

// shortDuration is d without its zero units: 1m, 2m40s, 1h (time.Duration's String says 1m0s).
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
