package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The KubeVela adapter's names: the policy type it reads from an Application's spec.policies, and
// what it puts on the ApplicationPolicies it writes.
const (
	// KubeVelaPolicyType is the type of the spec.policies entries turned into ApplicationPolicies
	// (config/kubevela/kyverno-policy.yaml defines it for KubeVela).
	KubeVelaPolicyType = "kyverno-policy"
	// LabelKubeVelaPolicy marks an ApplicationPolicy written for a KubeVela Application's entry; its
	// value is the entry's name (or, when that is no valid label value, a form of it with a hash).
	LabelKubeVelaPolicy = "policyhub.io/kubevela-policy"
	// AnnotationKubeVelaPolicyEntry holds the entry's exact name.
	AnnotationKubeVelaPolicyEntry = "policyhub.io/kubevela-policy-entry"
	// KubeVelaFieldManager is the field manager of the adapter's server-side applies.
	KubeVelaFieldManager = "policyhub-kubevela"
)

// ApplicationReconciler turns each `kyverno-policy` entry of a KubeVela Application's spec.policies into an ApplicationPolicy owned by the Application.
//
// It never writes the Application itself (no status, conditions or finalizers: KubeVela owns it);
// what it cannot do for an entry is said by a Warning Event on the Application.
type ApplicationReconciler struct {
	// Client reads Applications and ApplicationPolicies (the manager's cached client) and writes
	// ApplicationPolicies.
	Client   client.Client
	Recorder events.EventRecorder
}

// ApplicationServed reports whether the hub serves core.oam.dev/v1beta1 Application (the manager's RESTMapper); the hub registers the reconciler only then, and works without KubeVela.
func ApplicationServed(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(ApplicationGVK.GroupKind(), ApplicationGVK.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up %s in the hub's API: %w", ApplicationGVK, err)
	}
	return true, nil
}

// SetupWithManager registers the reconciler: Applications (as unstructured; spec changes and
// deletion) and the ApplicationPolicies they own (so a deleted or edited one is written again).
func (r *ApplicationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(ApplicationGVK)
	return ctrl.NewControllerManagedBy(mgr).
		// KubeVela writes the Application's status often; only spec changes (and deletion, which
		// bumps the generation) concern the adapter.
		For(app, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&policyhubv1.ApplicationPolicy{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Named("kubevela-application").
		Complete(r)
}

// Reconcile writes the ApplicationPolicies of one Application's kyverno-policy entries and deletes
// those whose entry is gone.
func (r *ApplicationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(ApplicationGVK)
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get Application: %w", err)
		}
		// Gone (nothing of ours held it back): its ApplicationPolicies go too. A garbage collector
		// would do it through the owner references; a hub may run without one.
		owned, err := r.ownedPolicies(ctx, req.Namespace, req.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		deleted, err := r.deletePolicies(ctx, nil, owned, "")
		if deleted > 0 {
			logger.Info("Application gone: deleted its ApplicationPolicies", "deleted", deleted)
		}
		return ctrl.Result{}, err
	}
	owned, err := r.ownedPolicies(ctx, app.GetNamespace(), app.GetName())
	if err != nil {
		return ctrl.Result{}, err
	}
	if !app.GetDeletionTimestamp().IsZero() {
		deleted, err := r.deletePolicies(ctx, app, owned, "the Application is being deleted")
		if deleted > 0 {
			logger.Info("Application being deleted: deleted its ApplicationPolicies", "deleted", deleted)
		}
		return ctrl.Result{}, err
	}

	entries := parseVelaEntries(app)
	live := map[string]*policyhubv1.ApplicationPolicy{}
	for i := range owned {
		live[owned[i].Name] = &owned[i]
	}
	wanted := map[string]bool{}
	var applied, refused int
	var failures []error
	for _, e := range entries {
		if e.Name != "" {
			wanted[velaPolicyName(app.GetName(), e.Name)] = true
		}
		if e.Err != nil {
			refused++
			r.warn(app, "InvalidPolicyEntry", e, e.Err.Error(), live)
			continue
		}
		spec, err := decodeVelaEntry(app.GetName(), e.Properties)
		if err != nil {
			refused++
			r.warn(app, "InvalidPolicyEntry", e, "properties: "+err.Error(), live)
			continue
		}
		changed, err := r.applyPolicy(ctx, app, e, spec, live)
		var refusal *velaRefusal
		switch {
		case errors.As(err, &refusal):
			refused++
			r.warn(app, refusal.reason, e, refusal.message, live)
		case err != nil:
			failures = append(failures, fmt.Errorf("entry %q: %w", e.Name, err))
		case changed:
			applied++
		}
	}
	var stale []policyhubv1.ApplicationPolicy
	for _, ap := range owned {
		if !wanted[ap.Name] {
			stale = append(stale, ap)
		}
	}
	deleted, err := r.deletePolicies(ctx, app, stale, "its kyverno-policy entry is gone")
	if err != nil {
		failures = append(failures, err)
	}
	if applied > 0 || deleted > 0 || refused > 0 || len(failures) > 0 {
		logger.Info(fmt.Sprintf("kyverno-policy entries: applied %d, deleted %d, refused %d, failed %d", applied, deleted, refused, len(failures)),
			"entries", len(entries))
	}
	return ctrl.Result{}, errors.Join(failures...)
}

// velaRefusal is an entry the hub will not take as it is: retrying cannot help, the user must
// change the entry.
type velaRefusal struct {
	reason, message string
}

func (e *velaRefusal) Error() string { return e.reason + ": " + e.message }

// applyPolicy server-side applies the entry's ApplicationPolicy. It reports whether the object was
// created or changed, and returns a *velaRefusal when the hub refuses it or its name is taken by
// an ApplicationPolicy the Application does not control (which is never taken over).
func (r *ApplicationReconciler) applyPolicy(ctx context.Context, app *unstructured.Unstructured, e velaEntry, spec policyhubv1.ApplicationPolicySpec, live map[string]*policyhubv1.ApplicationPolicy) (bool, error) {
	name := velaPolicyName(app.GetName(), e.Name)
	before, ours := live[name]
	if !ours {
		existing := &policyhubv1.ApplicationPolicy{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: app.GetNamespace(), Name: name}, existing)
		switch {
		case err == nil && controlledByVelaApplication(existing, app.GetName()):
			before, ours = existing, true // its label was removed: the apply puts it back
		case err == nil:
			return false, &velaRefusal{reason: "NameConflict", message: fmt.Sprintf(
				"ApplicationPolicy %s/%s exists and is not this Application's; it is left untouched", app.GetNamespace(), name)}
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("get ApplicationPolicy %s: %w", name, err)
		}
	}
	obj, err := velaApplicationPolicy(app, e.Name, spec)
	if err != nil {
		return false, err
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(KubeVelaFieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return false, &velaRefusal{reason: "PolicyRefused", message: fmt.Sprintf("the hub refuses ApplicationPolicy %s: %s", name, apiMessage(err))}
		}
		return false, fmt.Errorf("apply ApplicationPolicy %s: %w", name, err)
	}
	switch {
	case !ours:
		r.Recorder.Eventf(app, obj, corev1.EventTypeNormal, "PolicyCreated", "Apply",
			"created ApplicationPolicy %s from kyverno-policy entry %q", name, e.Name)
		return true, nil
	case before.Generation != obj.GetGeneration(): // the spec changed (status writes of others do not count)
		r.Recorder.Eventf(app, obj, corev1.EventTypeNormal, "PolicyUpdated", "Apply",
			"updated ApplicationPolicy %s from kyverno-policy entry %q", name, e.Name)
		return true, nil
	}
	return false, nil
}

// apiMessage is the API server's message of a refused request (for admission errors, the
// validation messages, CEL rules' included).
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// ownedPolicies lists the namespace's ApplicationPolicies written by the adapter and controlled by
// the Application named app (of any incarnation: an earlier Application of the same name leaves
// them to the current one).
func (r *ApplicationReconciler) ownedPolicies(ctx context.Context, namespace, app string) ([]policyhubv1.ApplicationPolicy, error) {
	list := &policyhubv1.ApplicationPolicyList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{LabelKubeVelaPolicy}); err != nil {
		return nil, fmt.Errorf("list the ApplicationPolicies of KubeVela entries in %s: %w", namespace, err)
	}
	var owned []policyhubv1.ApplicationPolicy
	for _, ap := range list.Items {
		if controlledByVelaApplication(&ap, app) {
			owned = append(owned, ap)
		}
	}
	return owned, nil
}

// controlledByVelaApplication reports whether obj's controller is the KubeVela Application named app.
func controlledByVelaApplication(obj metav1.Object, app string) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != ApplicationGVK.Kind || ref.Name != app {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == ApplicationGVK.Group
}

// deletePolicies deletes the ApplicationPolicies (those already being deleted are left to their
// finalizers) and counts the deletions. app, when not nil, gets an Event per deletion saying why.
func (r *ApplicationReconciler) deletePolicies(ctx context.Context, app *unstructured.Unstructured, policies []policyhubv1.ApplicationPolicy, why string) (int, error) {
	var deleted int
	var failures []error
	for i := range policies {
		ap := &policies[i]
		if !ap.DeletionTimestamp.IsZero() {
			continue
		}
		// The UID precondition keeps a newer object of the same name safe.
		err := r.Client.Delete(ctx, ap, client.Preconditions{UID: &ap.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		case err != nil:
			failures = append(failures, fmt.Errorf("delete ApplicationPolicy %s/%s: %w", ap.Namespace, ap.Name, err))
		default:
			deleted++
			if app != nil {
				r.Recorder.Eventf(app, ap, corev1.EventTypeNormal, "PolicyDeleted", "Delete",
					"deleted ApplicationPolicy %s of kyverno-policy entry %q: %s", ap.Name, ap.Annotations[AnnotationKubeVelaPolicyEntry], why)
			}
		}
	}
	return deleted, errors.Join(failures...)
}

// warn records on the Application why an entry got no ApplicationPolicy (or, when it had one, why
// that one keeps its last accepted spec). The entry's ApplicationPolicy is the Event's related
// object: Events are grouped by regarding, related, type, reason and action (not by note), so
// without it the refusals of two entries would be counted as one.
func (r *ApplicationReconciler) warn(app *unstructured.Unstructured, reason string, e velaEntry, message string, live map[string]*policyhubv1.ApplicationPolicy) {
	what, outcome := fmt.Sprintf("spec.policies[%d]", e.Index), "no ApplicationPolicy was written"
	var related runtime.Object
	if e.Name != "" {
		name := velaPolicyName(app.GetName(), e.Name)
		what = fmt.Sprintf("kyverno-policy entry %q", e.Name)
		if live[name] != nil {
			outcome = fmt.Sprintf("ApplicationPolicy %s keeps its last accepted spec", name)
		}
		ref := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: app.GetNamespace(), Name: name}}
		ref.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind("ApplicationPolicy"))
		related = ref
	}
	r.Recorder.Eventf(app, related, corev1.EventTypeWarning, reason, "Validate", "%s",
		policyhubv1.TruncateMessage(fmt.Sprintf("%s: %s: %s", what, outcome, message), 1024))
}

// velaEntry is one kyverno-policy entry of an Application's spec.policies.
type velaEntry struct {
	// Index is the entry's position in spec.policies.
	Index int
	// Name is the entry's name; empty when it has none.
	Name string
	// Properties are the entry's properties as JSON; nil when it has none.
	Properties []byte
	// Err says why the entry cannot be turned into an ApplicationPolicy at all.
	Err error
}

// parseVelaEntries reads the kyverno-policy entries of an Application's spec.policies; entries of
// other types are skipped. An entry that is malformed (no name, a name used before, properties
// that are no object) comes back with Err set.
func parseVelaEntries(app *unstructured.Unstructured) []velaEntry {
	// The Application CRD makes spec.policies a list of objects.
	policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
	var entries []velaEntry
	seen := map[string]bool{}
	for i, p := range policies {
		m, ok := p.(map[string]any)
		if !ok || m["type"] != KubeVelaPolicyType {
			continue
		}
		e := velaEntry{Index: i}
		e.Name, _ = m["name"].(string)
		switch {
		case e.Name == "":
			e.Err = errors.New("the entry has no name: its ApplicationPolicy is named <application>-<entry name>")
		case seen[e.Name]:
			e.Err = fmt.Errorf("the entry name %q is used by an earlier entry; only that one is turned into an ApplicationPolicy", e.Name)
			e.Name = "" // the earlier entry owns the name
		}
		if e.Name != "" {
			seen[e.Name] = true
		}
		if props, has := m["properties"]; has && props != nil && e.Err == nil {
			if _, isObject := props.(map[string]any); !isObject {
				e.Err = fmt.Errorf("properties are %T, not an object", props)
			} else if encoded, err := json.Marshal(props); err != nil {
				e.Err = fmt.Errorf("encode properties: %w", err)
			} else {
				e.Properties = encoded
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// velaDecoder decodes ApplicationPolicies strictly: unknown and duplicate fields are errors, and
// field names are case-sensitive.
var velaDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true})
}()

// velaGoField is how encoding/json names a field of the wrapping object in a type error, e.g.
// "Go struct field Scope.spec.scope.kinds"; the properties' path is what follows it.
var velaGoField = regexp.MustCompile(`Go struct field (\w+\.)?spec\.`)

// decodeVelaEntry decodes an entry's properties (JSON; nil for none) strictly into an
// ApplicationPolicySpec, with the application defaulted to app.
func decodeVelaEntry(app string, properties []byte) (policyhubv1.ApplicationPolicySpec, error) {
	if properties == nil {
		properties = []byte("{}")
	}
	gv := policyhubv1.GroupVersion.String()
	doc := []byte(`{"apiVersion":"` + gv + `","kind":"ApplicationPolicy","spec":`)
	doc = append(append(doc, properties...), '}')
	ap := &policyhubv1.ApplicationPolicy{}
	if _, _, err := velaDecoder.Decode(doc, nil, ap); err != nil {
		if strict, ok := runtime.AsStrictDecodingError(err); ok {
			var msgs []string
			for _, e := range strict.Errors() {
				// The fields are the properties', not the wrapping object's.
				msgs = append(msgs, strings.ReplaceAll(e.Error(), `"spec.`, `"`))
			}
			return policyhubv1.ApplicationPolicySpec{}, errors.New(strings.Join(msgs, "; "))
		}
		return policyhubv1.ApplicationPolicySpec{}, errors.New(velaGoField.ReplaceAllString(err.Error(), "field "))
	}
	if ap.Spec.Application == "" {
		ap.Spec.Application = app
	}
	return ap.Spec, nil
}

// velaApplicationPolicy is the ApplicationPolicy of the Application's entry, as applied: name,
// labels, annotation, controller reference and spec; nothing else, so the apply owns nothing else.
func velaApplicationPolicy(app *unstructured.Unstructured, entry string, spec policyhubv1.ApplicationPolicySpec) (*unstructured.Unstructured, error) {
	ap := &policyhubv1.ApplicationPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      velaPolicyName(app.GetName(), entry),
			Namespace: app.GetNamespace(),
			Labels: map[string]string{
				policyhubv1.DefaultApplicationLabel: app.GetName(),
				LabelKubeVelaPolicy:                 velaLabelValue(entry),
			},
			Annotations: map[string]string{AnnotationKubeVelaPolicyEntry: entry},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: ApplicationGVK.GroupVersion().String(), Kind: ApplicationGVK.Kind,
				Name: app.GetName(), UID: app.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: spec,
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		return nil, fmt.Errorf("convert ApplicationPolicy %s: %w", ap.Name, err)
	}
	obj := &unstructured.Unstructured{Object: content}
	obj.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind("ApplicationPolicy"))
	delete(obj.Object, "status")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	return obj, nil
}

// velaMaxName is the longest ApplicationPolicy name the adapter writes: a DNS label's length, so
// the name also fits where a label value or a DNS label is needed.
const velaMaxName = validation.DNS1123LabelMaxLength

// velaPolicyName is the ApplicationPolicy name of entry in app: <app>-<entry> when that is a valid
// DNS label (RFC 1123) of at most 63 characters; otherwise a lower-cased, cleaned and shortened
// form of it with a hash of the pair, so different entries never share a name.
func velaPolicyName(app, entry string) string {
	name := app + "-" + entry
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return velaWithHash(b.String(), app+"/"+entry, velaMaxName, velaAlnum)
}

// velaLabelValue is the LabelKubeVelaPolicy value of an entry: its name when that is a valid label
// value; otherwise a cleaned, shortened form with a hash of the name.
func velaLabelValue(entry string) string {
	if len(validation.IsValidLabelValue(entry)) == 0 {
		return entry
	}
	var b strings.Builder
	for _, c := range entry {
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return velaWithHash(b.String(), entry, validation.LabelValueMaxLength, func(c byte) bool {
		return velaAlnum(c) || (c >= 'A' && c <= 'Z')
	})
}

// velaWithHash is clean cut so that "-" and a 10-character hash of key fit in max, trimmed of
// characters that may not end it (alnum says which may), with the hash appended.
func velaWithHash(clean, key string, maxLen int, alnum func(byte) bool) string {
	sum := sha256.Sum256([]byte(key))
	hash := hex.EncodeToString(sum[:])[:10]
	if keep := maxLen - len(hash) - 1; len(clean) > keep {
		clean = clean[:keep]
	}
	start, end := 0, len(clean)
	for start < end && !alnum(clean[start]) {
		start++
	}
	for end > start && !alnum(clean[end-1]) {
		end--
	}
	if clean = clean[start:end]; clean == "" {
		return hash
	}
	return clean + "-" + hash
}

func velaAlnum(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }
