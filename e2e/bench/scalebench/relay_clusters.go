package main

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/hub/gateway"
)

// leasePerNameFrom is the replicas scenario's size from which its names get a sync Lease each
// unless -lease-per-name says otherwise: below it the names sharing a Lease cost little (3
// replicas × 3,000 names converged in minutes with 16 shared Leases), above it they decide the
// outcome (10,000 names never converged on them).
const leasePerNameFrom = 2000

// leasePerName says whether the scenario's names get a sync Lease each (the relay).
func (b *bench) leasePerName(scenario string, names int) bool {
	return b.o.leasePerName.or(scenario == "replicas" && names >= leasePerNameFrom)
}

// relayFor starts the lease relay at its first use; one serves every scenario of the run.
func (b *bench) relayFor() (*leaseRelay, error) {
	b.relayOnce.Do(func() {
		var targets []relayTarget
		for _, c := range b.f.Managed {
			targets = append(targets, relayTarget{url: c.URL, caData: c.CAData})
		}
		b.relay, b.relayErr = startLeaseRelay(targets)
		if b.relayErr == nil {
			logf("lease relay on port %d in front of %d apiservers: every name gets its own sync Lease", b.relay.port, len(targets))
		}
	})
	return b.relay, b.relayErr
}

// relayState is the bench's lease relay, started once.
type relayState struct {
	relayOnce sync.Once
	relay     *leaseRelay
	relayErr  error
	// likeSecrets are the real clusters' credential Secrets, read once, by cluster.
	likeMu      sync.Mutex
	likeSecrets map[string]*corev1.Secret
}

// addRelayedClusterSecret writes name's credential Secret as fleet.AddClusterSecret does (the
// real cluster like's token and credential type, the given labels), but pointing at the name's
// own relay endpoint and trusting the relay's CA.
func (b *bench) addRelayedClusterSecret(ctx context.Context, name string, backend int, labels map[string]string) error {
	rl, err := b.relayFor()
	if err != nil {
		return err
	}
	endpoint, err := rl.add(name, backend)
	if err != nil {
		return err
	}
	like, err := b.likeSecret(ctx, b.f.Managed[backend].Name)
	if err != nil {
		return err
	}
	data := maps.Clone(like.Data)
	data["endpoint"], data["ca.crt"] = []byte(endpoint), rl.caPEM
	wantLabels := maps.Clone(labels)
	if wantLabels == nil {
		wantLabels = map[string]string{}
	}
	wantLabels[gateway.CredentialTypeLabel] = like.Labels[gateway.CredentialTypeLabel]
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.f.SecretNamespace, Labels: wantLabels},
		Type:       like.Type,
		Data:       data,
	}
	err = b.hub.Create(ctx, secret)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("add cluster %s: %w", name, err)
		}
		return nil
	}
	live := &corev1.Secret{}
	if err := b.hub.Get(ctx, types.NamespacedName{Namespace: b.f.SecretNamespace, Name: name}, live); err != nil {
		return fmt.Errorf("replace cluster %s: %w", name, err)
	}
	live.Labels, live.Data, live.StringData = wantLabels, data, nil
	if err := b.hub.Update(ctx, live); err != nil {
		return fmt.Errorf("replace cluster %s: %w", name, err)
	}
	return nil
}

func (b *bench) likeSecret(ctx context.Context, cluster string) (*corev1.Secret, error) {
	b.likeMu.Lock()
	defer b.likeMu.Unlock()
	if s, ok := b.likeSecrets[cluster]; ok {
		return s, nil
	}
	s := &corev1.Secret{}
	if err := b.hub.Get(ctx, types.NamespacedName{Namespace: b.f.SecretNamespace, Name: cluster}, s); err != nil {
		return nil, fmt.Errorf("credential Secret of %s: %w", cluster, err)
	}
	if len(s.Data["token"]) == 0 {
		return nil, fmt.Errorf("credential Secret of %s holds no token", cluster)
	}
	if b.likeSecrets == nil {
		b.likeSecrets = map[string]*corev1.Secret{}
	}
	b.likeSecrets[cluster] = s
	return s, nil
}

// relayLine says what went through the relay, for the report.
func (b *bench) relayLine() string {
	if b.relay == nil {
		return ""
	}
	return fmt.Sprintf("sync Lease per name: %d requests relayed, %d sync Lease bodies renamed on the way in, %d failed (502 or refused); the relay's CPU counts as scalebench's",
		b.relay.requests.Load(), b.relay.renamed.Load(), b.relay.failed.Load())
}
