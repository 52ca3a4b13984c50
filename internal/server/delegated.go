package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/metrics"
)

// How long the answers of the API server are kept, as the kubelet keeps
// them by default (authentication.webhook.cacheTTL 2m,
// authorization.webhook.cacheAuthorizedTTL 5m and cacheUnauthorizedTTL
// 30s): a revoked token or a withdrawn grant is honoured within that long.
// Failures to get an answer are not kept.
const (
	tokenTTL   = 2 * time.Minute
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
	// cacheSize bounds each cache (tokens, access decisions): a few
	// scrapers need a few entries; a flood of made-up tokens pushes the
	// oldest out, it does not grow evictd.
	cacheSize = 256
	// reviewTimeout bounds each review: with both made, a scrape is
	// answered within about 10 s, Prometheus's default scrape_timeout,
	// however slow the API server.
	reviewTimeout = 5 * time.Second
	// maxReviews bounds the reviews in flight at once; a scrape that
	// would need one more is answered 503 at once. Together with the
	// timeout it keeps slow reviews from holding the connections
	// (maxConns) the probes need.
	maxReviews = 8
	// errorLogInterval is how often at most a failing review is logged
	// at Warn; the others in between are counted in the next line.
	errorLogInterval = time.Minute
)

// TokenReviewer asks the API server who a bearer token is: kubeclient's
// TokenReviews.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AccessReviewer asks the API server whether a user may do something:
// kubeclient's SubjectAccessReviews.
type AccessReviewer interface {
	Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Delegation has the API server check the scrapers of /metrics and
// /status, as the kubelet checks its own (webhook authentication and
// authorization) and kube-rbac-proxy the endpoints it fronts: a bearer
// token is reviewed by a TokenReview, then its user by a
// SubjectAccessReview of the non-resource URL (/metrics, /status) with
// the verb get. Both are made with evictd's own identity, which needs
// create on tokenreviews and subjectaccessreviews (the ClusterRole
// system:auth-delegator).
type Delegation struct {
	Tokens TokenReviewer
	Access AccessReviewer
	// Observe, when not nil, is told of each review the API server made
	// (not of answers from the cache): metrics.Metrics.ObserveReview.
	Observe func(metrics.Review, metrics.ReviewResult, time.Duration)
}

// errUnauthenticated is a token the API server does not know.
var errUnauthenticated = errors.New("the API server does not accept the bearer token")

// errBusy is a review not made because maxReviews are in flight.
var errBusy = errors.New("too many reviews of scrapers in flight")

// delegate checks scrapers through the API server, keeping its answers.
type delegate struct {
	Delegation
	clock clock.PassiveClock
	log   *slog.Logger

	tokens *cache.LRUExpireCache // sha256(token) → tokenAnswer
	access *cache.LRUExpireCache // accessKey → bool (allowed)
	flight singleflight.Group    // identical reviews in flight, made once
	slots  chan struct{}         // maxReviews
	// timeout bounds each review: reviewTimeout.
	timeout time.Duration

	mu         sync.Mutex
	lastLogged time.Time // of the last failing review logged at Warn
	unlogged   int       // failing reviews since, not logged at Warn
}

// tokenAnswer is what the API server said of a token: its user when
// authenticated, nil when not.
type tokenAnswer struct{ user *authenticationv1.UserInfo }

func newDelegate(d Delegation, clk clock.PassiveClock, log *slog.Logger) (*delegate, error) {
	if d.Tokens == nil || d.Access == nil {
		return nil, errors.New("delegated authentication and authorization need a TokenReview and a SubjectAccessReview client")
	}
	return &delegate{
		Delegation: d,
		clock:      clk,
		log:        log,
		tokens:     cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		access:     cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		slots:      make(chan struct{}, maxReviews),
		timeout:    reviewTimeout,
	}, nil
}

// check answers whether the bearer token may get path: 0 when it may,
// else the status code to answer and why.
func (d *delegate) check(ctx context.Context, token, path string) (int, string) {
	user, err := d.authenticate(ctx, token)
	switch {
	case errors.Is(err, errUnauthenticated):
		return http.StatusUnauthorized, "the bearer token is not valid"
	case err != nil:
		d.logFailure(ctx, "token", err)
		return http.StatusServiceUnavailable, "cannot check the bearer token with the API server: " + err.Error()
	}
	allowed, err := d.authorize(ctx, user, path)
	switch {
	case err != nil:
		d.logFailure(ctx, "access", err)
		return http.StatusServiceUnavailable, "cannot check access with the API server: " + err.Error()
	case !allowed:
		d.log.Debug("scrape forbidden", "user", user.Username, "path", path)
		return http.StatusForbidden, fmt.Sprintf("forbidden: user %q may not get %s", user.Username, path)
	}
	return 0, ""
}

// authenticate returns the user of token, from the cache or a
// TokenReview; errUnauthenticated when the API server does not accept it.
func (d *delegate) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := d.tokens.Get(key); ok {
		return v.(tokenAnswer).result()
	}
	v, err := d.once(ctx, "token:"+key, func(ctx context.Context) (any, error) {
		a, err := d.reviewToken(ctx, token)
		if err != nil {
			return nil, err
		}
		d.tokens.Add(key, a, tokenTTL)
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(tokenAnswer).result()
}

func (a tokenAnswer) result() (*authenticationv1.UserInfo, error) {
	if a.user == nil {
		return nil, errUnauthenticated
	}
	return a.user, nil
}

// reviewToken makes one TokenReview, for the API server's own audiences.
func (d *delegate) reviewToken(ctx context.Context, token string) (tokenAnswer, error) {
	start := d.clock.Now()
	tr, err := d.Tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	a, err := tokenReviewAnswer(tr, err)
	result := metrics.ReviewAuthenticated
	switch {
	case err != nil:
		result = metrics.ReviewError
	case a.user == nil:
		result = metrics.ReviewUnauthenticated
	}
	d.observe(metrics.ReviewToken, result, start)
	return a, err
}

// tokenReviewAnswer reads the answer to a TokenReview, refusing one that
// cannot be used.
func tokenReviewAnswer(tr *authenticationv1.TokenReview, err error) (tokenAnswer, error) {
	switch {
	case err != nil:
		return tokenAnswer{}, fmt.Errorf("TokenReview: %w", err)
	case tr == nil:
		return tokenAnswer{}, errors.New("TokenReview: no answer")
	case !tr.Status.Authenticated:
		return tokenAnswer{}, nil
	case tr.Status.User.Username == "":
		return tokenAnswer{}, errors.New("TokenReview: the answer says authenticated but names no user")
	}
	user := tr.Status.User
	return tokenAnswer{user: &user}, nil
}

// accessKey is what an access decision depends on, as a cache key.
type accessKey struct {
	User   string                                 `json:"u"`
	UID    string                                 `json:"i,omitempty"`
	Groups []string                               `json:"g,omitempty"`
	Extra  map[string]authenticationv1.ExtraValue `json:"e,omitempty"`
	Path   string                                 `json:"p"`
}

// authorize returns whether user may get path, from the cache or a
// SubjectAccessReview.
func (d *delegate) authorize(ctx context.Context, user *authenticationv1.UserInfo, path string) (bool, error) {
	// encoding/json writes a map's keys sorted: one key per decision.
	b, err := json.Marshal(accessKey{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: user.Extra, Path: path})
	if err != nil {
		return false, fmt.Errorf("access key: %w", err)
	}
	key := string(b)
	if v, ok := d.access.Get(key); ok {
		return v.(bool), nil
	}
	v, err := d.once(ctx, "access:"+key, func(ctx context.Context) (any, error) {
		allowed, err := d.reviewAccess(ctx, user, path)
		if err != nil {
			return nil, err
		}
		ttl := deniedTTL
		if allowed {
			ttl = allowedTTL
		}
		d.access.Add(key, allowed, ttl)
		return allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// reviewAccess makes one SubjectAccessReview of get on the non-resource
// URL path for user.
func (d *delegate) reviewAccess(ctx context.Context, user *authenticationv1.UserInfo, path string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}
	if len(user.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	start := d.clock.Now()
	answer, err := d.Access.Create(ctx, sar, metav1.CreateOptions{})
	result := metrics.ReviewDenied
	allowed := false
	switch {
	case err != nil:
		err = fmt.Errorf("SubjectAccessReview: %w", err)
	case answer == nil:
		err = errors.New("SubjectAccessReview: no answer")
	case answer.Status.Allowed:
		allowed, result = true, metrics.ReviewAllowed
	case answer.Status.EvaluationError != "":
		// No opinion, or a partial one: not allowed, as the API
		// server's own chain of authorizers ends.
		d.log.Debug("SubjectAccessReview evaluation error", "user", user.Username, "path", path, "err", answer.Status.EvaluationError)
	}
	if err != nil {
		result = metrics.ReviewError
	}
	d.observe(metrics.ReviewAccess, result, start)
	return allowed, err
}

// once makes the review fn under key once for the callers that ask at the
// same time, on a context of its own bounded by d.timeout: a scraper
// that hangs up does not fail the others', and what comes back is cached
// for the next. A caller waits for it until its own ctx ends. When
// maxReviews are in flight it fails at once with errBusy.
func (d *delegate) once(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	ch := d.flight.DoChan(key, func() (any, error) {
		select {
		case d.slots <- struct{}{}:
		default:
			return nil, errBusy
		}
		defer func() { <-d.slots }()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
		return fn(rctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *delegate) observe(review metrics.Review, result metrics.ReviewResult, start time.Time) {
	if d.Observe != nil {
		d.Observe(review, result, d.clock.Since(start))
	}
}

// logFailure warns of a review that got no usable answer, at most once
// per errorLogInterval, saying how many it did not log since. A scraper
// that went away before the answer is not a failure of the review.
func (d *delegate) logFailure(ctx context.Context, review string, err error) {
	if ctx.Err() != nil {
		return
	}
	d.mu.Lock()
	now := d.clock.Now()
	if !d.lastLogged.IsZero() && now.Sub(d.lastLogged) < errorLogInterval {
		d.unlogged++
		d.mu.Unlock()
		d.log.Debug("a review of a scraper failed", "review", review, "err", err)
		return
	}
	unlogged := d.unlogged
	d.lastLogged, d.unlogged = now, 0
	d.mu.Unlock()
	d.log.Warn("cannot check a scraper of /metrics or /status with the API server; answering 503 (evicting as usual)",
		"review", review, "err", err, "failedSinceLastWarning", unlogged)
}
