package work

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/policyhub/policyhub/hub/plan"
)

// Drift by content, not by name. inSync (compare.go) judges from the watch cache, without a
// request: the content hash, the fields other managers own, the values the hub sets. It cannot
// see a field added under policyhub's own field-manager name (anyone may apply as "policyhub"):
// managedFields then name policyhub alone, and a rule's added `exclude` looks like the keys
// Kyverno's defaults add, which inSync must tolerate. Only the API server knows what applying the
// hub's object would leave (schema defaults, admission webhooks, the fields the last apply as
// policyhub set and the hub's does not), so the hub asks it: a server-side apply dry-run of the
// desired object (as policyhub, forced) compared with the live object. A difference is drift,
// corrected by the real apply, which drops what the last apply under policyhub's name set and the
// hub does not.
//
// One dry-run per object per pass would make a quiet fleet cost a request per object per resync,
// so each cluster remembers, per owned object, the state the hub last verified: written by its
// own apply (the apply's answer), or checked by a dry-run. The state is the generation (the API
// server bumps it on every change outside metadata and status) and a digest of the metadata an
// apply may carry (labels, annotations, finalizers, owner references), so a write that changes
// neither (Kyverno's status) costs nothing, and any other is verified once. A hub that restarts,
// or a replica that takes a cluster over, remembers nothing: one dry-run per owned object, once.

// verifiedMetadata are the metadata fields an apply may set, compared with the dry-run's answer
// and digested in the remembered state.
var verifiedMetadata = []string{"labels", "annotations", "finalizers", "ownerReferences"}

// objectState is an object's state as far as drift goes.
type objectState struct {
	generation int64
	digest     uint64
}

// verifications remembers the state of each owned object of one cluster that the hub verified
// holds what it would apply. The digest is keyed by a random seed: a cluster admin who chooses
// labels cannot aim a changed object at a remembered digest without knowing the seed. Bounded by
// the owned objects a cluster may hold; past it, the memory starts over (remembering only saves
// requests; it is never needed to be right).
type verifications struct {
	seed maphash.Seed
	max  int

	mu     sync.Mutex
	states map[plan.Key]objectState
	// drifted are states found not to hold what the hub would apply, until the hub writes: the
	// object's own status write, or a replan of a refused write, does not ask again.
	drifted map[plan.Key]objectState
	// inFlight counts the hub's writes of an object under way, and seen is the latest change the
	// watch brought of one meanwhile: the watch may bring the hub's own write before its answer
	// is recorded, and that must not cost another pass.
	inFlight map[plan.Key]int
	seen     map[plan.Key]*unstructured.Unstructured
}

func newVerifications(max int) *verifications {
	return &verifications{seed: maphash.MakeSeed(), max: max, states: map[plan.Key]objectState{}, drifted: map[plan.Key]objectState{},
		inFlight: map[plan.Key]int{}, seen: map[plan.Key]*unstructured.Unstructured{}}
}

// stateOf is obj's state: its generation and the digest of its UID and verifiedMetadata.
func (v *verifications) stateOf(obj *unstructured.Unstructured) objectState {
	var h maphash.Hash
	h.SetSeed(v.seed)
	h.WriteString(string(obj.GetUID()))
	digest := h.Sum64()
	meta, _ := obj.Object["metadata"].(map[string]any)
	for _, field := range verifiedMetadata {
		value := meta[field]
		if isEmpty(value) {
			continue
		}
		if m, ok := value.(map[string]any); ok && (field == "labels" || field == "annotations") {
			// Summed per entry: a map has no order, and this needs no sorting or encoding.
			for k, val := range m {
				s, _ := val.(string)
				h.Reset()
				h.WriteString(field)
				h.WriteByte(0)
				h.WriteString(k)
				h.WriteByte(0)
				h.WriteString(s)
				digest += h.Sum64()
			}
			continue
		}
		// Finalizers and owner references are rare on a policy: encoded whole.
		data, err := json.Marshal(value)
		if err != nil {
			data = []byte{0xff} // not JSON: never the state of anything JSON
		}
		h.Reset()
		h.WriteString(field)
		h.WriteByte(0)
		h.Write(data)
		digest += h.Sum64()
	}
	return objectState{generation: obj.GetGeneration(), digest: digest}
}

// verdict is what is known of obj's state: verified, drifted, or neither.
type verdict int

const (
	stateUnknown verdict = iota
	stateVerified
	stateDrifted
)

// verdictOf says what is known of obj's state.
func (v *verifications) verdictOf(obj *unstructured.Unstructured) verdict {
	state, key := v.stateOf(obj), plan.KeyOf(obj)
	v.mu.Lock()
	defer v.mu.Unlock()
	if known, ok := v.states[key]; ok && known == state {
		return stateVerified
	}
	if known, ok := v.drifted[key]; ok && known == state {
		return stateDrifted
	}
	return stateUnknown
}

// holds reports whether obj is in the state last verified for it.
func (v *verifications) holds(obj *unstructured.Unstructured) bool {
	return v.verdictOf(obj) == stateVerified
}

// record remembers obj's state as verified.
func (v *verifications) record(obj *unstructured.Unstructured) {
	v.remember(v.states, obj)
}

// recordDrift remembers obj's state as drifted.
func (v *verifications) recordDrift(obj *unstructured.Unstructured) {
	v.remember(v.drifted, obj)
}

// remember puts obj's state in states (verified or drifted), and takes it out of the other.
func (v *verifications) remember(states map[plan.Key]objectState, obj *unstructured.Unstructured) {
	state, key := v.stateOf(obj), plan.KeyOf(obj)
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.states, key)
	delete(v.drifted, key)
	if len(states) >= v.max {
		clear(states)
	}
	states[key] = state
}

// changed is a change the watch saw to obj: it reports whether obj is in a state not verified.
// While the hub writes the object, the change is kept for writeDone to judge instead.
func (v *verifications) changed(obj *unstructured.Unstructured) (unverified bool) {
	state, key := v.stateOf(obj), plan.KeyOf(obj)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.inFlight[key] > 0 {
		v.seen[key] = obj
		return false
	}
	known, ok := v.states[key]
	return !ok || known != state
}

// writing says the hub is about to write the object of key.
func (v *verifications) writing(key plan.Key) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.inFlight[key]++
}

// writeDone says the hub's write of the object of key is over; answer, when not nil, is the
// cluster's answer to it, verified. It returns the latest change the watch saw meanwhile if that
// is not in a verified state (someone else's write, or the hub's refused), for the caller to
// report as changed.
func (v *verifications) writeDone(key plan.Key, answer *unstructured.Unstructured) *unstructured.Unstructured {
	if answer != nil {
		v.record(answer)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.inFlight[key]--; v.inFlight[key] > 0 {
		return nil
	}
	delete(v.inFlight, key)
	seen := v.seen[key]
	delete(v.seen, key)
	if seen == nil {
		return nil
	}
	if known, ok := v.states[key]; ok && known == v.stateOf(seen) {
		return nil
	}
	return seen
}

// forget drops what is remembered of the object of key (deleted, or no longer the hub's).
func (v *verifications) forget(key plan.Key) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.states, key)
	delete(v.drifted, key)
}

// appliedAsLive reports whether live holds what applying the hub's object would leave (after, the
// answer of a dry-run apply): every field outside metadata and status, and verifiedMetadata.
// Server-kept metadata (resourceVersion, managedFields ...) and status (Kyverno's) do not count.
func appliedAsLive(live, after *unstructured.Unstructured) bool {
	for _, obj := range []*unstructured.Unstructured{live, after} {
		other := after
		if obj == after {
			other = live
		}
		for k, value := range obj.Object {
			switch k {
			case "apiVersion", "kind", "metadata", "status":
				continue
			}
			if !sameValue(value, other.Object[k]) {
				return false
			}
		}
	}
	liveMeta, _ := live.Object["metadata"].(map[string]any)
	afterMeta, _ := after.Object["metadata"].(map[string]any)
	for _, field := range verifiedMetadata {
		a, b := liveMeta[field], afterMeta[field]
		if isEmpty(a) && isEmpty(b) {
			continue
		}
		if !sameValue(a, b) {
			return false
		}
	}
	return true
}

// sameValue reports whether a and b are equal, numbers by value whatever their Go type.
func sameValue(a, b any) bool {
	return contains(a, b) && contains(b, a)
}

// isEmpty says whether a metadata value is absent or empty (the API server drops empty ones).
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// verify checks, with a dry-run apply each, the changes planned Unchanged whose live object is
// not in a state verified before (see above): one that holds what the apply would leave is
// remembered as verified; any other is drift, to update (a dry-run that fails is too: the write
// then says what is wrong, and nothing unverified is reported Synced). The dry-runs persist
// nothing and need no Lease; they run at most Concurrency at a time.
func (s *Syncer) verify(ctx context.Context, cc *clusterClients, w *workPlan) {
	ask := map[*change]bool{}
	for _, c := range w.changes {
		if c.action != ActionUnchanged || c.live == nil {
			continue
		}
		switch cc.verified.verdictOf(c.live) {
		case stateVerified:
		case stateDrifted:
			c.action = ActionUpdate
		default:
			ask[c] = true
		}
	}
	s.eachChange(w, func(c *change) bool { return ask[c] }, func(c *change) {
		after, err := Apply(ctx, cc.client, c.desired, nil, true)
		switch {
		case err != nil:
			c.action = ActionUpdate
		case appliedAsLive(c.live, after):
			cc.verified.record(c.live)
		default:
			cc.verified.recordDrift(c.live)
			// A dry-run write of this change asks the same question: it takes this answer.
			c.action, c.after = ActionUpdate, after
		}
	})
}
