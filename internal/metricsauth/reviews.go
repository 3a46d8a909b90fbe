package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// guard authenticates and authorizes requests, caching the apiserver's answers.
type guard struct {
	o      Options
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	// slots holds one token per review in flight.
	slots chan struct{}
	// flights asks each review once, however many requests wait for its answer; waiting counts
	// those requests (the tests observe it).
	flights singleflight.Group
	waiting atomic.Int32
	// The apiserver's acceptances and refusals are cached apart (both by hash): made-up tokens and
	// paths fill only the refusals' caches, and cannot evict an authenticated user's answers.
	users     *ttlCache[*authenticationv1.UserInfo] // accepted tokens
	strangers *ttlCache[struct{}]                   // refused tokens
	allowed   *ttlCache[struct{}]                   // by access request
	denied    *ttlCache[string]                     // by access request: the reason
}

func newGuard(config *rest.Config, httpClient *http.Client, o Options, now func() time.Time) (*guard, error) {
	authn, err := authenticationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("tokenreviews client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("subjectaccessreviews client: %w", err)
	}
	o = o.withDefaults()
	return &guard{o: o, tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(),
		slots: make(chan struct{}, o.MaxConcurrentReviews),
		users: newTTLCache[*authenticationv1.UserInfo](now), strangers: newTTLCache[struct{}](now),
		allowed: newTTLCache[struct{}](now), denied: newTTLCache[string](now)}, nil
}

// authenticate returns the user of token; nil when the apiserver does not accept it for one of
// the audiences. wait: wait for a review slot (up to the review timeout) instead of failing with
// errBusy at once.
func (g *guard) authenticate(ctx context.Context, token string, wait bool) (*authenticationv1.UserInfo, error) {
	key := hash("token\x00" + token)
	if user, ok := g.users.get(key); ok {
		return user, nil
	}
	if _, ok := g.strangers.get(key); ok {
		return nil, nil
	}
	v, err := g.review(ctx, key, wait, func(ctx context.Context) (any, error) {
		review, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
			Token: token, Audiences: g.o.Audiences}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create a TokenReview: %w", err)
		}
		if !review.Status.Authenticated || !g.audienceAccepted(review.Status.Audiences) {
			g.strangers.put(key, struct{}{}, g.o.TokenTTL)
			return (*authenticationv1.UserInfo)(nil), nil
		}
		user := &review.Status.User
		g.users.put(key, user, g.o.TokenTTL)
		return user, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*authenticationv1.UserInfo), nil
}

// audienceAccepted says whether the apiserver said the token is for one of the audiences asked:
// an apiserver (or webhook) that ignored them answers none, and is not trusted to have checked.
func (g *guard) audienceAccepted(status []string) bool {
	if len(g.o.Audiences) == 0 {
		return true
	}
	return slices.ContainsFunc(status, func(a string) bool { return slices.Contains(g.o.Audiences, a) })
}

// authorize asks whether user may do verb on the non-resource path.
func (g *guard) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string, wait bool) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		User:                  user.Username,
		Groups:                user.Groups,
		UID:                   user.UID,
	}
	if len(user.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	keyData, err := json.Marshal(spec)
	if err != nil {
		return false, "", err
	}
	key := hash("access\x00" + string(keyData))
	if _, ok := g.allowed.get(key); ok {
		return true, "cached", nil
	}
	if reason, ok := g.denied.get(key); ok {
		return false, reason, nil
	}
	type verdict struct {
		allowed bool
		reason  string
	}
	v, err := g.review(ctx, key, wait, func(ctx context.Context) (any, error) {
		review, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create a SubjectAccessReview: %w", err)
		}
		if review.Status.Allowed && !review.Status.Denied {
			g.allowed.put(key, struct{}{}, g.o.AllowTTL)
			return verdict{true, review.Status.Reason}, nil
		}
		g.denied.put(key, review.Status.Reason, g.o.DenyTTL)
		return verdict{false, review.Status.Reason}, nil
	})
	if err != nil {
		return false, "", err
	}
	return v.(verdict).allowed, v.(verdict).reason, nil
}

// review runs ask once for every caller waiting on key, in a review slot. Without a free slot it
// fails with errBusy at once, unless wait. The review's own context is not the first caller's: a
// caller that goes away does not fail the others waiting for the same answer.
func (g *guard) review(ctx context.Context, key string, wait bool, ask func(context.Context) (any, error)) (any, error) {
	// A waiting caller that joined a flight which found no slot starts one of its own (twice at most).
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	for range 3 {
		ch := g.flights.DoChan(key, func() (any, error) {
			reviewCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
			defer cancel()
			if !g.acquire(reviewCtx, wait) {
				return nil, errBusy
			}
			defer func() { <-g.slots }()
			return ask(reviewCtx)
		})
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-ch:
			if res.Err == errBusy && wait && res.Shared {
				continue
			}
			return res.Val, res.Err
		}
	}
	return nil, errBusy
}

// acquire takes a review slot: at once, or with wait until ctx ends.
func (g *guard) acquire(ctx context.Context, wait bool) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	if !wait {
		return false
	}
	select {
	case g.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// hash keys the caches and the flights, so that they never hold a token itself.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return string(sum[:])
}
