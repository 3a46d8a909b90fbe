package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// FleetPolicyExceptionReconciler syncs approved FleetPolicyExceptions, as Kyverno
// PolicyExceptions, into the clusters their target's policy runs in, and removes them from every
// cluster when they end (expiry, revocation, denial, a new unapproved generation).
type FleetPolicyExceptionReconciler struct {
	engine.DeclarationOptions

	// APIReader reads what the cache does not hold: a PolicySet's snapshots.
	APIReader client.Reader
	// MaxLifetime bounds how far after its creation an exception may end; zero means
	// policyhubv1.DefaultMaxExceptionLifetime.
	MaxLifetime time.Duration
	// Now is the hub's clock; nil means time.Now.
	Now func() time.Time
	// Metrics exports the exceptions' end dates, states and exempted results (nil: not exported).
	Metrics *metrics.Exceptions
	// ApprovableServiceAccounts: see declare.ApprovalRules.
	ApprovableServiceAccounts []string

	room engine.Room
	// fence is the admission fence as policyhub ships it, read once at setup.
	fence declare.ExceptionFence
}

// SetupWithManager registers the reconciler: exception spec changes and approvals, the
// inventory, and the clusters its target's policy runs in (the target's ClusterStatusSlices)
// trigger it; its end date wakes it by itself.
func (r *FleetPolicyExceptionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	fence, err := declare.NewExceptionFence()
	if err != nil {
		return err
	}
	r.fence = fence
	b := engine.ControllerFor(mgr, "fleetpolicyexception", policyhubv1.KindFleetPolicyException, &policyhubv1.FleetPolicyException{},
		&r.DeclarationOptions, &r.room, r.every, r.inCluster, nil, approvalChanged())
	b = b.Watches(&policyhubv1.ClusterStatusSlice{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.ofTargetSlice)),
		builder.WithPredicates(engine.SlicesOfKinds(policyhubv1.KindFleetPolicy, policyhubv1.KindPolicySet), engine.SyncedClustersChanged())).
		Watches(&policyhubv1.FleetPolicy{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.ofTarget)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&policyhubv1.PolicySet{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.ofTarget)),
			builder.WithPredicates(setVersionChanged())).
		Watches(&policyhubv1.TenantGrant{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.every)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// The fence: every exception is judged again when it is installed, changed or removed.
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.every),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(r.every),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	return b.Complete(r)
}

// approvalChanged passes an approver's decision (status.approval), which changes no generation.
func approvalChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*policyhubv1.FleetPolicyException)
		updated, okNew := e.ObjectNew.(*policyhubv1.FleetPolicyException)
		if !okOld || !okNew {
			return false
		}
		return !equalApproval(old.Status.Approval, updated.Status.Approval)
	}}
}

// equalApproval compares two decisions whole: an approval written again (another time, another
// comment) is a new one, which counts where the one before was marked unchecked.
func equalApproval(a, b *policyhubv1.ExceptionApproval) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// setVersionChanged passes a PolicySet's spec changes and new versions (its members change).
func setVersionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*policyhubv1.PolicySet)
		updated, okNew := e.ObjectNew.(*policyhubv1.PolicySet)
		if !okOld || !okNew {
			return true
		}
		return old.Generation != updated.Generation || snapshotOf(old) != snapshotOf(updated)
	}}
}

func snapshotOf(ps *policyhubv1.PolicySet) string {
	if ps.Status.Source == nil {
		return ""
	}
	return ps.Status.Source.Snapshot
}

// list reads the exceptions for the event maps: the cache's own objects (see readOnlyList).
func (r *FleetPolicyExceptionReconciler) list(ctx context.Context) []policyhubv1.FleetPolicyException {
	list := &policyhubv1.FleetPolicyExceptionList{}
	if err := r.Client.List(ctx, list, engine.ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "list FleetPolicyExceptions")
		return nil
	}
	return list.Items
}

func (r *FleetPolicyExceptionReconciler) every(ctx context.Context, _ client.Object) []reconcile.Request {
	return engine.RequestsFor[policyhubv1.FleetPolicyException](r.list(ctx), nil)
}

// targeting are the exceptions whose target is the declaration kind/name.
func (r *FleetPolicyExceptionReconciler) targeting(ctx context.Context, kind, name string) []reconcile.Request {
	return engine.RequestsFor(r.list(ctx), func(ex *policyhubv1.FleetPolicyException) bool {
		return ex.Spec.Target.Kind == kind && ex.Spec.Target.Name == name
	})
}

func (r *FleetPolicyExceptionReconciler) ofTargetSlice(ctx context.Context, obj client.Object) []reconcile.Request {
	s, ok := obj.(*policyhubv1.ClusterStatusSlice)
	if !ok || s.Namespace != r.Namespace {
		return nil
	}
	return r.targeting(ctx, s.Declaration.Kind, s.Declaration.Name)
}

func (r *FleetPolicyExceptionReconciler) ofTarget(ctx context.Context, obj client.Object) []reconcile.Request {
	switch obj.(type) {
	case *policyhubv1.FleetPolicy:
		return r.targeting(ctx, policyhubv1.KindFleetPolicy, obj.GetName())
	case *policyhubv1.PolicySet:
		return r.targeting(ctx, policyhubv1.KindPolicySet, obj.GetName())
	}
	return nil
}

func (r *FleetPolicyExceptionReconciler) inCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	return engine.DeclarationsInCluster(ctx, r.Reader, policyhubv1.KindFleetPolicyException, "", summary.GetNamespace())
}

// Reconcile judges the exception on the hub's clock, then runs target → clusters → render → sync
// (nothing for an exception not Active: it is pruned everywhere) and records the outcome.
func (r *FleetPolicyExceptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ex := &policyhubv1.FleetPolicyException{}
	if err := r.Client.Get(ctx, req.NamespacedName, ex); err != nil {
		if apierrors.IsNotFound(err) {
			r.room.Forget(req.NamespacedName)
			if r.Metrics != nil {
				r.Metrics.Delete(req.Namespace, req.Name)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	maxLifetime := r.MaxLifetime
	if maxLifetime <= 0 {
		maxLifetime = policyhubv1.DefaultMaxExceptionLifetime
	}
	rules := declare.ApprovalRules{FenceMissing: r.fenceMissing(ctx), ApprovableServiceAccounts: r.ApprovableServiceAccounts}
	verdict := declare.SandboxedException(ex, declare.ExceptionState(ex, now(), maxLifetime, rules))
	d := &fleetPolicyException{FleetPolicyException: ex, r: r, verdict: verdict}
	d.was = ex.Status.State
	return r.Engine(&r.room).Reconcile(ctx, req.NamespacedName, d)
}

// fenceMissing says what of the approvals' admission fence is missing on the hub, from the
// manager's cache; a fence it cannot read is missing.
func (r *FleetPolicyExceptionReconciler) fenceMissing(ctx context.Context) string {
	policies := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	if err := r.Reader.List(ctx, policies, engine.ReadOnlyList); err != nil {
		return "the hub cannot read its ValidatingAdmissionPolicies (" + err.Error() + ")"
	}
	if err := r.Reader.List(ctx, bindings, engine.ReadOnlyList); err != nil {
		return "the hub cannot read its ValidatingAdmissionPolicyBindings (" + err.Error() + ")"
	}
	return r.fence.Missing(policies.Items, bindings.Items)
}

// fleetPolicyException is a FleetPolicyException as the engine's declaration.
type fleetPolicyException struct {
	*policyhubv1.FleetPolicyException
	r *FleetPolicyExceptionReconciler
	// verdict is its state at this reconcile, by the hub's clock; was is the state the status
	// said before it.
	verdict declare.ExceptionVerdict
	was     string
	// refused says why an approved exception is in force nowhere and never will be as it stands
	// (its rendering refused, or not one of its places granted): its state is then Invalid, not
	// Active ("" otherwise).
	refused string
}

func (d *fleetPolicyException) Object() policyhubv1.Declaration { return d.FleetPolicyException }
func (d *fleetPolicyException) Kind() string                    { return policyhubv1.KindFleetPolicyException }
func (d *fleetPolicyException) Suspended() bool                 { return false }
func (d *fleetPolicyException) Prune() bool                     { return true }
func (d *fleetPolicyException) Copy() engine.Declaration {
	c := *d
	c.FleetPolicyException = d.FleetPolicyException.DeepCopy()
	return &c
}

func (d *fleetPolicyException) Source(hubID string) string {
	return render.FleetPolicyExceptionOwner(hubID, d.Namespace, d.Name).Source()
}

// RenderInput is the exception's state: the render changes with it (only Active renders
// anything), and the approver (named on the rendered object).
func (d *fleetPolicyException) RenderInput() string {
	input := d.verdict.State
	if a := d.Status.Approval; a != nil {
		input += "/" + a.By
	}
	return input
}

// Render resolves the target's policy and the clusters it runs in, within spec.clusters and, for
// a tenant's exception, its grants; then renders the Kyverno exception for them. Nothing is
// rendered unless the exception is Active, and nothing for one that cannot be rendered: unlike a
// policy, an exception left in the clusters as it was would keep exempting what its spec no
// longer says (it is Stalled, and pruned everywhere).
func (d *fleetPolicyException) Render(ctx context.Context) (*engine.Rendering, error) {
	r, err := d.renderActive(ctx)
	if invalid, ok := render.AsInvalid(err); ok {
		owner := render.FleetPolicyExceptionOwner(d.r.HubID, d.Namespace, d.Name)
		return &engine.Rendering{Targets: &render.Targets{Source: owner.Source(), Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{}},
			Detail: exceptionRendering{refused: invalid}}, nil
	}
	return r, err
}

// exceptionRendering is what an exception's rendering holds besides its targets: the policy it
// exempts from (kind/namespace/name), or why that is not found ("" when it is); refused says why
// the exception cannot be rendered (nil when it can): it is then in no cluster.
type exceptionRendering struct {
	excepted, missing string
	refused           *render.InvalidError
}

func (d *fleetPolicyException) renderActive(ctx context.Context) (*engine.Rendering, error) {
	owner := render.FleetPolicyExceptionOwner(d.r.HubID, d.Namespace, d.Name)
	empty := &engine.Rendering{Targets: &render.Targets{Source: owner.Source(), Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{}}}
	if d.verdict.State != policyhubv1.ExceptionActive {
		return empty, nil
	}
	policy, targetUID, missing, err := d.resolveTarget(ctx)
	if err != nil {
		return nil, err
	}
	if missing != "" {
		empty.Detail = exceptionRendering{missing: missing}
		return empty, nil
	}
	running, _, err := statusslice.Read(ctx, d.r.Reader, statusslice.Owner{Kind: d.Spec.Target.Kind, Name: d.Spec.Target.Name, UID: targetUID, Namespace: d.r.Namespace})
	if err != nil {
		return nil, err
	}
	inv, err := placement.ReadInventory(ctx, d.r.Reader, d.r.SecretNamespace)
	if err != nil {
		return nil, fmt.Errorf("read the cluster inventory: %w", err)
	}
	clusters, err := chosenClusters(d.Spec.Clusters, declare.SyncedIn(running), inv)
	if err != nil {
		return nil, &render.InvalidError{Reason: "InvalidClusters", Err: err}
	}
	ex := d.FleetPolicyException
	var notGranted []string
	if d.Namespace != d.r.Namespace {
		// A tenant's exception reaches only the namespaces granted to it, cluster by cluster.
		if ex, clusters, notGranted, err = d.withinGrants(ctx, clusters, inv); err != nil {
			return nil, err
		}
	}
	t, err := render.ExceptionTargets(d.r.HubID, ex, policy, exceptionNamespaces(inv), clusters)
	if err != nil {
		return nil, err
	}
	t.NotGranted = notGranted
	return &engine.Rendering{Targets: t, Detail: exceptionRendering{excepted: policy.Ref()}}, nil
}

// resolveTarget finds the Kyverno policy the target renders: a FleetPolicy's template (named
// like the FleetPolicy unless it names itself), or the PolicySet member in the set's current
// version. missing says why it is not there.
func (d *fleetPolicyException) resolveTarget(ctx context.Context) (policy render.ExceptedPolicy, uid, missing string, err error) {
	target := d.Spec.Target
	switch target.Kind {
	case policyhubv1.KindFleetPolicy:
		fp := &policyhubv1.FleetPolicy{}
		if err := d.r.Reader.Get(ctx, client.ObjectKey{Name: target.Name}, fp); err != nil {
			if apierrors.IsNotFound(err) {
				return policy, "", fmt.Sprintf("FleetPolicy %s (spec.target) does not exist", target.Name), nil
			}
			return policy, "", "", fmt.Errorf("read the target FleetPolicy %s: %w", target.Name, err)
		}
		tmpl := fp.Spec.Template
		name := tmpl.Metadata.Name
		if name == "" {
			name = fp.Name
		}
		return render.ExceptedPolicy{APIVersion: tmpl.APIVersion, Kind: tmpl.Kind, Namespace: tmpl.Metadata.Namespace, Name: name}, string(fp.UID), "", nil
	case policyhubv1.KindPolicySet:
		ps := &policyhubv1.PolicySet{}
		if err := d.r.Reader.Get(ctx, client.ObjectKey{Name: target.Name}, ps); err != nil {
			if apierrors.IsNotFound(err) {
				return policy, "", fmt.Sprintf("PolicySet %s (spec.target) does not exist", target.Name), nil
			}
			return policy, "", "", fmt.Errorf("read the target PolicySet %s: %w", target.Name, err)
		}
		if ps.Status.Source == nil || ps.Status.Source.Snapshot == "" {
			return policy, "", fmt.Sprintf("PolicySet %s has no version yet", ps.Name), nil
		}
		reader := source.Reader{Hub: d.r.APIReader, Secrets: d.r.APIReader, Namespace: d.r.Namespace, Limits: source.DefaultLimits}
		art, err := reader.Snapshot(ctx, ps, ps.Status.Source.Snapshot)
		if err != nil {
			return policy, "", "", fmt.Errorf("read PolicySet %s's version: %w", ps.Name, err)
		}
		if art == nil {
			return policy, "", fmt.Sprintf("PolicySet %s's version %s is gone", ps.Name, ps.Status.Source.Revision), nil
		}
		m := target.Member
		for _, p := range art.Policies {
			if ref := source.Ref(p); ref == *m {
				return render.ExceptedPolicy{APIVersion: p.GetAPIVersion(), Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}, string(ps.UID), "", nil
			}
		}
		member := render.ExceptedPolicy{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}
		return policy, "", fmt.Sprintf("PolicySet %s's version %s has no member %s (spec.target.member)",
			ps.Name, ps.Status.Source.Revision, member.Ref()), nil
	}
	return policy, "", fmt.Sprintf("spec.target.kind %q is not FleetPolicy or PolicySet", target.Kind), nil
}

// exceptionNamespaces says where each cluster's Kyverno reads exceptions from: its label
// policyhubv1.LabelExceptionNamespace, else policyhubv1.DefaultExceptionNamespace.
func exceptionNamespaces(inv placement.Inventory) func(string) string {
	labelled := map[string]string{}
	for _, c := range inv.Clusters {
		if ns := c.Labels[policyhubv1.LabelExceptionNamespace]; ns != "" {
			labelled[c.Name] = ns
		}
	}
	return func(cluster string) string {
		if ns, ok := labelled[cluster]; ok {
			return ns
		}
		return policyhubv1.DefaultExceptionNamespace
	}
}

// chosenClusters are the clusters, among those the policy runs in, that spec.clusters names or
// selects.
func chosenClusters(choice policyhubv1.ExceptionClusters, running []string, inv placement.Inventory) ([]string, error) {
	var selector labels.Selector
	if choice.ClusterSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(choice.ClusterSelector.LabelSelector()); err != nil {
			return nil, fmt.Errorf("spec.clusters.clusterSelector: %w", err)
		}
	}
	labelsOf := map[string]map[string]string{}
	for _, c := range inv.Clusters {
		labelsOf[c.Name] = c.Labels
	}
	var out []string
	for _, c := range running {
		if slices.Contains(choice.Names, c) || (selector != nil && selector.Matches(labels.Set(labelsOf[c]))) {
			out = append(out, c)
		}
	}
	return out, nil
}

// withinGrants confines a tenant's exception: its namespaces (its own namespace's name when it
// lists none; no wildcards) must all be granted to it in a cluster for the exception to go there.
// The exception returned lists the namespaces it was confined to.
func (d *fleetPolicyException) withinGrants(ctx context.Context, clusters []string, inv placement.Inventory) (*policyhubv1.FleetPolicyException, []string, []string, error) {
	ex := d.FleetPolicyException
	namespaces := ex.Spec.Resources.Namespaces
	for _, ns := range namespaces {
		if strings.ContainsAny(ns, "*?") {
			return nil, nil, nil, &render.InvalidError{Reason: "InvalidException", Err: fmt.Errorf(
				"spec.resources.namespaces: %q has a wildcard; a tenant's exception names the namespaces granted to it", ns)}
		}
	}
	if len(namespaces) == 0 {
		ex = ex.DeepCopy()
		ex.Spec.Resources.Namespaces = []string{ex.Namespace}
		namespaces = ex.Spec.Resources.Namespaces
	}
	grants, err := placement.ReadGrants(ctx, d.r.Reader, ex.Namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	reach, err := placement.ReachOf(grants, inv)
	if err != nil {
		return nil, nil, nil, err
	}
	var allowed, refused []string
	for _, c := range clusters {
		ok := true
		for _, ns := range namespaces {
			if !reach.Allows(c, ns) {
				ok = false
				refused = append(refused, c+"/"+ns)
			}
		}
		if ok {
			allowed = append(allowed, c)
		}
	}
	return ex, allowed, refused, nil
}

// SetResults sets, in each cluster's state, the results the exception turned into skip there
// (the agents count the results Kyverno marks with the exception's name), and their sum in the
// status. A cluster whose summary could not be read keeps what it had.
func (d *fleetPolicyException) SetResults(clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, _ map[string][]aggregate.Policy, _ time.Time) []policyhubv1.ClusterStatus {
	name := policyhubv1.ExceptionObjectName(d.Namespace, d.Name)
	var total int64
	for i := range clusters {
		c := &clusters[i]
		if read.Unread[c.Name] {
			if c.Results != nil {
				total = aggregate.AddCount(total, c.Results.Skip)
			}
			continue
		}
		c.Results = nil
		s := read.Summaries[c.Name]
		if s == nil {
			continue
		}
		for _, e := range s.Spec.Exceptions {
			if e.Name == name {
				c.Results = &policyhubv1.ResultCounts{Skip: e.Results}
				total = aggregate.AddCount(total, e.Results)
				break
			}
		}
	}
	d.Status.Exempted = total
	return clusters
}

// Progress sets the exception's own status (state, clusters in force, Approved) and holds Ready
// while it is not Active, or its target is missing; it wakes at the end date.
func (d *fleetPolicyException) Progress(r *engine.Rendering, outcomes []engine.Outcome, _ []policyhubv1.ClusterStatus, _ time.Time) engine.Progress {
	d.judged()
	x, _ := r.Detail.(exceptionRendering)
	d.Status.Policy = x.excepted
	var inForce int32
	for _, o := range outcomes {
		if r.Targets.Objects[o.Cluster] != nil && !o.Pending && o.Result.Phase == policyhubv1.ClusterPhaseSynced {
			inForce++
		}
	}
	d.Status.InForce = inForce
	p := engine.Progress{Wake: d.verdict.Wake}
	switch {
	case d.verdict.State != policyhubv1.ExceptionActive:
		p.Holding, p.Reason = d.verdict.Message, d.verdict.State
		if d.verdict.Reason != "" {
			p.Reason = d.verdict.Reason
		}
	case x.refused != nil:
		p.Holding, p.Reason, p.Stalled = x.refused.Error()+": in force nowhere", x.refused.Reason, true
		d.refuse(x.refused.Reason + ": " + x.refused.Error())
	case x.missing != "":
		p.Holding, p.Reason = x.missing+": in force nowhere", "TargetMissing"
	case len(r.Targets.NotGranted) > 0 && len(r.Targets.Objects) == 0:
		// Not one place it asks for is granted to its namespace (the engine's NotGranted condition says
		// which, and how a hub admin grants them): approved, but in force nowhere.
		d.refuse(engine.ReasonNotGranted + ": not one of its places is granted to namespace " + d.Namespace + ", so it is in force nowhere")
	}
	return p
}

// refuse makes an approved exception Invalid, saying why: Active would claim it exempts something
// while it is in force nowhere. Its approval stands (Approved stays True), and it is judged again
// on every change (of it, its target, the grants), becoming Active once it can take effect.
func (d *fleetPolicyException) refuse(why string) {
	d.refused = policyhubv1.TruncateMessage(why, 1024)
	d.Status.State = policyhubv1.ExceptionInvalid
}

// judged sets the exception's state and its Approved condition from this reconcile's verdict, and
// marks an approval seen while the fence was missing (the mark goes once another decision
// replaces it).
func (d *fleetPolicyException) judged() {
	d.Status.State = d.verdict.State
	switch a := d.Status.Approval; {
	case d.verdict.MarkUnchecked:
		d.Status.UncheckedApproval = a.DeepCopy()
	case d.Status.UncheckedApproval != nil && (a == nil || !equality.Semantic.DeepEqual(*a, *d.Status.UncheckedApproval)):
		d.Status.UncheckedApproval = nil
	}
	reason := d.verdict.State
	if d.verdict.Reason != "" {
		reason = d.verdict.Reason
	}
	approved := metav1.Condition{Type: policyhubv1.ConditionApproved, Status: metav1.ConditionFalse, Reason: reason,
		Message: policyhubv1.TruncateMessage(d.verdict.Message, 1024), ObservedGeneration: d.Generation}
	switch d.verdict.State {
	case policyhubv1.ExceptionActive:
		approved.Status, approved.Reason = metav1.ConditionTrue, policyhubv1.DecisionApproved
	case policyhubv1.ExceptionExpired:
		// Whatever was decided, it has ended.
		if a := d.Status.Approval; a != nil && a.Decision == policyhubv1.DecisionApproved && a.Generation == d.Generation {
			approved.Status, approved.Reason = metav1.ConditionTrue, policyhubv1.DecisionApproved
		}
	}
	meta.SetStatusCondition(&d.Status.Conditions, approved)
}

// AfterStatus exports the exception's metrics and announces a change of state (approved,
// denied, revoked, expired) once.
func (d *fleetPolicyException) AfterStatus(context.Context) time.Duration {
	if d.r.Metrics != nil {
		d.r.Metrics.Set(d.FleetPolicyException)
	}
	if d.was == d.Status.State {
		return 0
	}
	kind := corev1.EventTypeNormal
	if d.Status.State == policyhubv1.ExceptionInvalid {
		kind = corev1.EventTypeWarning
	}
	msg := d.verdict.Message
	switch {
	case d.refused != "":
		msg = fmt.Sprintf("%s, but in force nowhere: %s", msg, d.refused)
	case d.Status.State == policyhubv1.ExceptionActive:
		msg = fmt.Sprintf("%s; in force in %d clusters", msg, d.Status.InForce)
	}
	d.r.Recorder.Eventf(d.FleetPolicyException, nil, kind, d.Status.State, "Judge", "%s", policyhubv1.TruncateMessage(msg, 1024))
	return 0
}
