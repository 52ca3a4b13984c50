package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// TestDelegatedAuthAPIServer runs the server with delegated checks made
// by evictd's own identity (deploy/rbac.yaml and
// deploy/rbac-auth-delegator.yaml) against a real API server:
// a ServiceAccount a ClusterRole lets get /metrics scrapes, one without
// it is forbidden, no token or a made-up one is unauthorized; answers are
// kept; with the API server stopped, an unknown token fails at once while
// the probes and the kept answers still work.
func TestDelegatedAuthAPIServer(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	evictdToken, err := c.EvictdToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What --metrics-delegated-auth needs beside deploy/rbac.yaml.
	if _, err := testcluster.CreateManifest(ctx, admin, "../../deploy/rbac-auth-delegator.yaml"); err != nil {
		t.Fatal(err)
	}

	// The scrapers: prometheus may get /metrics, other may not.
	const ns = "monitoring"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"prometheus", "other", "late"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evictd-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "evictd-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, sa := range []string{"prometheus", "other", "late"} {
		if tokens[sa], err = testcluster.ServiceAccountToken(ctx, admin, ns, sa); err != nil {
			t.Fatal(err)
		}
	}

	client, err := kubeclient.NewForConfig(c.TokenConfig(evictdToken))
	if err != nil {
		t.Fatal(err)
	}
	// RBAC is loaded through watches: wait until evictd may review and
	// prometheus may get /metrics, so that no early denial is kept.
	waitRBAC(t, client, "system:serviceaccount:"+ns+":prometheus")

	reg := prometheus.NewRegistry()
	met := metrics.New(reg)
	s := New("127.0.0.1:0", reg, nil, func() any { return "status" }, nil)
	if err := s.Secure(Access{Delegated: &Delegation{Tokens: client.TokenReviews(), Access: client.SubjectAccessReviews(), Observe: met.ObserveReview}}); err != nil {
		t.Fatal(err)
	}
	base := start(t, s).base
	// A client of its own, whose idle connections (a connection dialed
	// for a request that another one served is idle and new to the
	// server) are closed before the server stops.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)

	for _, tc := range []struct {
		name, path, token string
		wantCode          int
		wantBody          string
	}{
		{"allowed", "/metrics", tokens["prometheus"], 200, "evictd_scrape_reviews_total"},
		{"allowed /metrics only", "/status", tokens["prometheus"], 403, "may not get /status"},
		// The landing page names the build: reviewed for its own path.
		{"the landing page, allowed /metrics only", "/", tokens["prometheus"], 403, "may not get /"},
		{"the landing page, no token", "/", "", 401, "a bearer token is required"},
		{"not allowed", "/metrics", tokens["other"], 403, `forbidden: user "system:serviceaccount:monitoring:other" may not get /metrics`},
		{"no token", "/metrics", "", 401, "a bearer token is required"},
		{"garbage token", "/metrics", "garbage", 401, "the bearer token is not valid"},
		{"evictd's own token, not granted", "/metrics", evictdToken, 403, "system:serviceaccount:kube-system:evictd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, hc, base+tc.path, tc.token)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("got %d %.200q, want %d with %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}

	reviews := func() float64 {
		t.Helper()
		var n float64
		for _, p := range []struct{ review, result string }{{"token", "authenticated"}, {"token", "unauthenticated"}, {"token", "error"}, {"access", "allowed"}, {"access", "denied"}, {"access", "error"}} {
			n += testutil.ToFloat64(met.ReviewCounter(metrics.Review(p.review), metrics.ReviewResult(p.result)))
		}
		return n
	}
	before := reviews()
	if code, _ := do(t, hc, base+"/metrics", tokens["prometheus"]); code != 200 {
		t.Fatalf("second scrape: got %d, want 200", code)
	}
	if after := reviews(); after != before {
		t.Errorf("a second scrape made %v reviews, want none (kept)", after-before)
	}

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	// An unknown token fails within the review's bound, not hanging; the
	// probes answer meanwhile; the kept answer still serves.
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		code, body := do(t, hc, base+"/metrics", tokens["late"])
		got <- answer{code, body}
	}()
	if code, _ := do(t, hc, base+"/healthz", ""); code != 200 {
		t.Errorf("/healthz with the API server stopped: got %d, want 200", code)
	}
	select {
	case a := <-got:
		if a.code != 503 || !strings.Contains(a.body, "cannot check the bearer token with the API server") {
			t.Errorf("scrape with the API server stopped: got %d %q, want 503", a.code, a.body)
		}
	case <-time.After(3 * reviewTimeout):
		t.Fatal("a scrape with the API server stopped did not answer")
	}
	if code, _ := do(t, hc, base+"/metrics", tokens["prometheus"]); code != 200 {
		t.Errorf("kept answer with the API server stopped: got %d, want 200", code)
	}
}

// waitRBAC waits until client may create TokenReviews and user may get
// /metrics.
func waitRBAC(t *testing.T, client *kubeclient.Client, user string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, last = client.TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "probe"}}, metav1.CreateOptions{}); last != nil {
			return false, nil
		}
		sar, err := client.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		if last = err; err != nil {
			return false, nil
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC not in force: last error %v", last)
	}
}
