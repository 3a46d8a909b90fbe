package work

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// defaultProbeTimeout is how long a cluster has to answer the probe before it counts as unreachable.
const defaultProbeTimeout = 5 * time.Second

// probeFresh is how long a successful answer stands for the cluster's health: passes within it
// skip the probe (the cluster has just answered; requests have their own deadline).
const probeFresh = 10 * time.Second

// UnreachableError says a cluster could not be reached through the gateway at all: no answer in
// time, connection refused, a TLS failure, the gateway's own 5xx, refused credentials. It is
// reported once per cluster pass, for every declaration wanted there, and retried with backoff.
type UnreachableError struct {
	Cluster string
	// Reason is short and human: "no answer within 5s", "connection refused", …
	Reason string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: unreachable: %s", e.Cluster, e.Reason)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err is (or wraps) an UnreachableError.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// probe asks the cluster for its version, the cheapest request it serves, within timeout. A
// cluster that answered within probeFresh is not asked again.
func (s *Syncer) probe(ctx context.Context, cc *clusterClients, cluster string) error {
	if last := cc.answered.Load(); last != nil && time.Since(*last) < probeFresh {
		return nil
	}
	timeout := s.opts.ProbeTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := cc.clientset.Discovery().RESTClient().Get().AbsPath("/version").Timeout(timeout).Do(ctx).Error()
	if err != nil {
		return &UnreachableError{Cluster: cluster, Reason: unreachableReason(err, timeout), Err: err}
	}
	now := time.Now()
	cc.answered.Store(&now)
	return nil
}

// unreachableReason says in a few words why a request did not reach the cluster.
func unreachableReason(err error, timeout time.Duration) string {
	msg := err.Error()
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout(),
		strings.Contains(msg, "Client.Timeout exceeded"), strings.Contains(msg, "i/o timeout"),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Sprintf("no answer within %s", timeout)
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case strings.Contains(msg, "no such cluster"):
		return "the gateway has no such cluster (its credential Secret is missing)"
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"):
		return "TLS failure: " + lastPart(msg)
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		return "credentials refused: " + lastPart(msg)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return fmt.Sprintf("the gateway answered %d: %s", status.Status().Code, lastPart(msg))
	}
	return lastPart(msg)
}

// lastPart keeps the end of a wrapped error chain, where the cause is, bounded.
func lastPart(msg string) string {
	const keep = 300
	if len(msg) <= keep {
		return msg
	}
	start := len(msg) - keep
	for start < len(msg) && !utf8.RuneStart(msg[start]) {
		start++
	}
	return "..." + msg[start:]
}
