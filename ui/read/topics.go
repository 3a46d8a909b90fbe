package read

import (
	"sync"
)

// Topics name what changed, for a page to tell whether it shows it: "cluster/NAME" (a cluster's
// summary), "decl/KIND/NAMESPACE/NAME" (a declaration, or its per-cluster state; FleetPolicies
// and PolicySets have no namespace), "exception/NAMESPACE/NAME", "inventory" (the clusters and
// their labels). A page follows the topic prefixes it names in its data-watch attribute (ui.js).
const (
	TopicInventory = "inventory"
	// TopicAll stands for every topic, when more changed than a subscriber keeps apart.
	TopicAll = "*"
)

// ClusterTopic is the topic of a cluster's summary.
func ClusterTopic(cluster string) string { return "cluster/" + cluster }

// DeclarationTopic is the topic of a declaration and its per-cluster state.
func DeclarationTopic(kind, namespace, name string) string {
	return "decl/" + kind + "/" + namespace + "/" + name
}

// ExceptionTopic is the topic of a FleetPolicyException.
func ExceptionTopic(namespace, name string) string { return "exception/" + namespace + "/" + name }

// maxPending is how many distinct topics a subscriber keeps apart before it is told "everything
// changed": a subscriber costs bounded memory however busy the fleet is.
const maxPending = 256

// Broker hands changes to subscribers, each change once per subscriber however often it
// happened before the subscriber took it.
type Broker struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewBroker returns a broker with no subscribers.
func NewBroker() *Broker { return &Broker{subs: map[*Subscription]struct{}{}} }

// Subscription collects the topics changed since its last Take.
type Subscription struct {
	broker  *Broker
	pending map[string]struct{}
	// Ready receives a value when topics are pending.
	Ready chan struct{}
}

// Subscribe starts collecting changes; Close stops.
func (b *Broker) Subscribe() *Subscription {
	s := &Subscription{broker: b, pending: map[string]struct{}{}, Ready: make(chan struct{}, 1)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish records topic as changed for every subscriber.
func (b *Broker) Publish(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		switch _, all := s.pending[TopicAll]; {
		case all:
		case len(s.pending) >= maxPending:
			clear(s.pending)
			s.pending[TopicAll] = struct{}{}
		default:
			s.pending[topic] = struct{}{}
		}
		select {
		case s.Ready <- struct{}{}:
		default:
		}
	}
}

// Take returns the topics changed since the last Take, and forgets them.
func (s *Subscription) Take() []string {
	s.broker.mu.Lock()
	defer s.broker.mu.Unlock()
	topics := make([]string, 0, len(s.pending))
	for t := range s.pending {
		topics = append(topics, t)
	}
	clear(s.pending)
	return topics
}

// Close stops the subscription.
func (s *Subscription) Close() {
	s.broker.mu.Lock()
	delete(s.broker.subs, s)
	s.broker.mu.Unlock()
}
