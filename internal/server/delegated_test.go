package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/metrics"
)

// fakeReviews is an API server's reviews: tokens maps a token to its
// user, allowed says who may get which path. err, when set, fails every
// review; block, when set, holds each until it is closed or the review's
// context ends.
type fakeReviews struct {
	tokens  map[string]authenticationv1.UserInfo
	allowed map[string]bool // user + " " + path
	broken  bool            // authenticated answers name no user

	mu     sync.Mutex
	err    error
	block  chan struct{}
	nToken atomic.Int32
	nSAR   atomic.Int32
	sars   []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) wait(ctx context.Context) error {
	f.mu.Lock()
	block, err := f.block, f.err
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

type fakeTokens struct{ *fakeReviews }

func (f fakeTokens) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.nToken.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	out := tr.DeepCopy()
	if u, ok := f.tokens[tr.Spec.Token]; ok {
		out.Status.Authenticated, out.Status.User = true, u
		if f.broken {
			out.Status.User.Username = ""
		}
	}
	return out, nil
}

type fakeAccess struct{ *fakeReviews }

func (f fakeAccess) Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.nSAR.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.sars = append(f.sars, sar.Spec)
	f.mu.Unlock()
	out := sar.DeepCopy()
	if a := sar.Spec.NonResourceAttributes; a != nil && a.Verb == "get" {
		out.Status.Allowed = f.allowed[sar.Spec.User+" "+a.Path]
	}
	return out, nil
}

func newFakeReviews() *fakeReviews {
	return &fakeReviews{
		tokens: map[string]authenticationv1.UserInfo{
			"prom-token":  {Username: "system:serviceaccount:monitoring:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}},
			"other-token": {Username: "system:serviceaccount:default:other", UID: "u2"},
		},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus /metrics": true},
	}
}

// startDelegated serves a registry with delegated checks against f, and,
// unless tokenFile is empty, that token file too.
// It returns the server, its base URL, its clock and a client whose idle
// connections are closed before the server stops.
func startDelegated(t *testing.T, f *fakeReviews, tokenFile string, observe func(metrics.Review, metrics.ReviewResult, time.Duration)) (*Server, string, *clocktesting.FakeClock, *http.Client) {
	t.Helper()
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, func() any { return "status" }, nil)
	fc := clocktesting.NewFakeClock(time.Now())
	s.clock = fc
	if err := s.Secure(Access{TokenFile: tokenFile, Delegated: &Delegation{Tokens: fakeTokens{f}, Access: fakeAccess{f}, Observe: observe}}); err != nil {
		t.Fatal(err)
	}
	base := start(t, s).base
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return s, base, fc, hc
}

func TestDelegatedAnswers(t *testing.T) {
	f := newFakeReviews()
	static := writeFile(t, t.TempDir(), "token", "static-token\n")
	_, base, _, hc := startDelegated(t, f, static, nil)
	for _, tc := range []struct {
		name, path, token string
		wantCode          int
		wantBody          string
	}{
		{"no token", "/metrics", "", 401, "a bearer token is required"},
		{"garbage token", "/metrics", "garbage", 401, "the bearer token is not valid"},
		{"allowed", "/metrics", "prom-token", 200, "promhttp_metric_handler_requests_total"},
		{"allowed /metrics, not /status", "/status", "prom-token", 403, `forbidden: user "system:serviceaccount:monitoring:prometheus" may not get /status`},
		{"not allowed", "/metrics", "other-token", 403, `user "system:serviceaccount:default:other" may not get /metrics`},
		{"static token", "/status", "static-token", 200, "status"},
		{"probe without token", "/healthz", "", 200, "ok"},
		{"readiness without token", "/readyz", "", 200, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, hc, base+tc.path, tc.token)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("got %d %q, want %d with %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
	// The static token never reaches the API server; the others are
	// reviewed once each (cached), with the user's UID, groups and extra.
	if got := f.nToken.Load(); got != 3 {
		t.Errorf("got %d TokenReviews, want 3 (garbage, prom-token, other-token)", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sar := range f.sars {
		if sar.User == "system:serviceaccount:monitoring:prometheus" && (sar.UID != "u1" || len(sar.Groups) != 1 || len(sar.Extra["k"]) != 1) {
			t.Errorf("SubjectAccessReview %+v lacks the user's UID, groups or extra", sar)
		}
	}
}

// TestDelegatedCache: answers are kept for the kubelet's TTLs, a denial
// for less long than an allowance, and failures not at all.
func TestDelegatedCache(t *testing.T) {
	f := newFakeReviews()
	var mu sync.Mutex
	observed := map[string]int{}
	_, base, fc, hc := startDelegated(t, f, "", func(r metrics.Review, res metrics.ReviewResult, _ time.Duration) {
		mu.Lock()
		observed[string(r)+"/"+string(res)]++
		mu.Unlock()
	})
	scrape := func(token string, want int) {
		t.Helper()
		if code, body := do(t, hc, base+"/metrics", token); code != want {
			t.Fatalf("got %d %q, want %d", code, body, want)
		}
	}
	counts := func(wantToken, wantSAR int32) {
		t.Helper()
		if gt, gs := f.nToken.Load(), f.nSAR.Load(); gt != wantToken || gs != wantSAR {
			t.Errorf("got %d TokenReviews and %d SubjectAccessReviews, want %d and %d", gt, gs, wantToken, wantSAR)
		}
	}
	scrape("prom-token", 200)
	scrape("prom-token", 200)
	counts(1, 1)
	scrape("other-token", 403)
	scrape("other-token", 403)
	counts(2, 2)

	fc.Step(deniedTTL + time.Second) // the denial expires
	scrape("other-token", 403)
	counts(2, 3)
	fc.Step(tokenTTL) // the tokens expire, prom-token's allowance not yet
	scrape("prom-token", 200)
	counts(3, 3)
	fc.Step(allowedTTL)
	scrape("prom-token", 200)
	counts(4, 4)

	// The API server fails: 503, nothing kept; once it answers again,
	// so does evictd.
	fc.Step(allowedTTL + time.Second)
	f.mu.Lock()
	f.err = errors.New("connection refused")
	f.mu.Unlock()
	scrape("prom-token", 503)
	scrape("prom-token", 503)
	counts(6, 4)
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	scrape("prom-token", 200)
	counts(7, 5)

	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"token/authenticated": 5, "token/error": 2, "access/allowed": 3, "access/denied": 2}
	for k, n := range want {
		if observed[k] != n {
			t.Errorf("observed %s %d times, want %d (all: %v)", k, observed[k], n, observed)
		}
	}
}

// TestDelegatedSlowAPIServer: a review that does not answer fails the
// scrape after the timeout, identical ones in flight are made once, more
// than maxReviews at once are refused at once, and the probes answer
// meanwhile.
func TestDelegatedSlowAPIServer(t *testing.T) {
	f := newFakeReviews()
	f.block = make(chan struct{})
	s, base, _, hc := startDelegated(t, f, "", nil)
	s.delegate.timeout = 500 * time.Millisecond

	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Go(func() {
			code, _ := do(t, hc, base+"/metrics", "prom-token")
			codes <- code
		})
	}
	// Probes do not wait for reviews.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if code, _ := do(t, hc, base+"/healthz", ""); code != 200 {
			t.Errorf("got /healthz %d while reviews hang, want 200", code)
		}
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("/healthz waited for the reviews")
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 503 {
			t.Errorf("got %d for a scrape whose review timed out, want 503", code)
		}
	}
	if got := f.nToken.Load(); got != 1 {
		t.Errorf("got %d TokenReviews for 3 identical scrapes at once, want 1", got)
	}

	// maxReviews distinct tokens hang; one more is refused at once.
	s.delegate.timeout = guard
	for i := range maxReviews {
		wg.Go(func() { do(t, hc, base+"/metrics", "hanging-"+string(rune('a'+i))) })
	}
	deadline := time.Now().Add(guard)
	for len(s.delegate.slots) < maxReviews && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	code, body := do(t, hc, base+"/metrics", "one-more")
	if code != 503 || !strings.Contains(body, errBusy.Error()) {
		t.Errorf("got %d %q with %d reviews in flight, want 503 %q", code, body, maxReviews, errBusy)
	}
	close(f.block)
	wg.Wait()
}

// TestDelegatedBrokenAnswers: answers that cannot be used are errors
// naming the review, never a panic nor an allowance.
func TestDelegatedBrokenAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   *authenticationv1.TokenReview
		err  error
		want string
	}{
		{"no answer", nil, nil, "TokenReview: no answer"},
		{"error", nil, errors.New("boom"), "TokenReview: boom"},
		{"authenticated without a user", &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: true}}, nil, "names no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tokenReviewAnswer(tc.tr, tc.err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || a.user != nil {
				t.Errorf("got %v, %v; want an error with %q", a.user, err, tc.want)
			}
		})
	}
	f := newFakeReviews()
	f.broken = true
	_, base, _, hc := startDelegated(t, f, "", nil)
	if code, body := do(t, hc, base+"/metrics", "prom-token"); code != 503 || !strings.Contains(body, "names no user") {
		t.Errorf("got %d %q, want 503 naming the broken answer", code, body)
	}
	if _, err := newDelegate(Delegation{}, clocktesting.NewFakeClock(time.Now()), nil); err == nil {
		t.Error("a Delegation without clients: got no error")
	}
}
