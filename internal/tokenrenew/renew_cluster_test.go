package tokenrenew

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// renewals records a Renewer's attempts.
type renewals struct {
	mu       sync.Mutex
	ok, fail int
	lastErr  error
}

func (r *renewals) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.fail++
		r.lastErr = err
		return
	}
	r.ok++
}

func (r *renewals) counts() (int, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.fail, r.lastErr
}

// whoAmI returns the user the API server sees behind token.
func whoAmI(ctx context.Context, c *testcluster.Cluster, token string) (authenticationv1.UserInfo, error) {
	client, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// TestRenewerOnAPIServer runs the Renewer on a real kube-apiserver with
// deploy/ applied, over a token of kube-system/evictd bound to node n1 for
// 10 minutes (the API server's minimum), renewing it when less than 9m57s
// is left: every 3 seconds. Each renewal must write a new token, mode
// 0600, of the same ServiceAccount bound to the same Node, that the API
// server accepts as evictd on n1, while a client reading the file (as the
// agent's does) keeps working; a token bound to another node is refused
// by deploy/policy.yaml; with the API server stopped, attempts fail, are
// retried and leave the token as it was, and the next renewal after its
// return succeeds. Last, a client built once over the file moves to the
// last token by itself, within client-go's minute.
func TestRenewerOnAPIServer(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	nodes := map[string]*v1.Node{}
	for _, n := range []string{"n1", "n2"} {
		var err error
		if nodes[n], err = admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// deploy/ applied and enforced; then the operator's first token, for
	// the shortest lifetime the API server grants.
	if _, err := c.EvictdNodeToken(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	secs := int64(kubeclient.MinTokenLifetime / time.Second)
	first, err := admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "evictd", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &secs,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: nodes["n1"].UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(first.Status.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The agent's client: the tokenFile, as a kubeconfig's.
	rc := c.TokenConfig("")
	rc.BearerTokenFile = path
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	var rec renewals
	r, err := NewRenewer(RenewerConfig{
		Path:        path,
		RenewBefore: kubeclient.MinTokenLifetime - 3*time.Second,
		RetryMin:    200 * time.Millisecond,
		RetryMax:    time.Second,
		OnRenewal:   rec.record,
	}, client)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	defer stop()

	// Three renewals, each checked.
	seen := map[string]bool{}
	prev, _ := kubeclient.ParseToken(first.Status.Token)
	seen[prev.ID] = true
	for i := 1; i <= 3; i++ {
		var tok string
		var claims kubeclient.TokenClaims
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return false, err
			}
			tok = strings.TrimSpace(string(b))
			claims, err = kubeclient.ParseToken(tok)
			return err == nil && !seen[claims.ID], err
		})
		if err != nil {
			ok, fail, last := rec.counts()
			t.Fatalf("renewal %d: no new token in the file within 30s (%d renewed, %d failed, last error %v): %v", i, ok, fail, last, err)
		}
		seen[claims.ID] = true
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("renewal %d: mode %04o, want 0600", i, fi.Mode().Perm())
		}
		if claims.Namespace != "kube-system" || claims.ServiceAccount != "evictd" || claims.Node != "n1" || claims.NodeUID != string(nodes["n1"].UID) ||
			claims.Pod != "" || claims.Lifetime() != kubeclient.MinTokenLifetime || !claims.Expiry.After(prev.Expiry) && claims.ID == prev.ID {
			t.Errorf("renewal %d: claims %+v; want kube-system/evictd bound to n1 alone, for 10m", i, claims)
		}
		u, err := whoAmI(ctx, c, tok)
		if err != nil {
			t.Fatalf("renewal %d: the new token: %v", i, err)
		}
		if u.Username != "system:serviceaccount:kube-system:evictd" || !equalExtra(u.Extra["authentication.kubernetes.io/node-name"], "n1") ||
			!equalExtra(u.Extra["authentication.kubernetes.io/credential-id"], "JTI="+claims.ID) {
			t.Errorf("renewal %d: the API server sees %s with extra %v; want evictd on n1 with this token's JTI", i, u.Username, u.Extra)
		}
		// The agent's client, over the file, keeps working.
		if _, err := client.Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"}); err != nil {
			t.Errorf("renewal %d: the client over the tokenFile: %v", i, err)
		}
		prev = claims
	}

	// A token bound to another node: refused by the policy.
	_, err = client.RequestToken(ctx, kubeclient.TokenRequest{Namespace: "kube-system", ServiceAccount: "evictd", Lifetime: kubeclient.MinTokenLifetime, Node: "n2", NodeUID: string(nodes["n2"].UID)})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'evictd-token-request'") {
		t.Errorf("n1's evictd asking for a token bound to n2: got %v, want the refusal of evictd-token-request", err)
	}

	// The API server away: attempts fail and are retried, the token stays.
	okBefore, failBefore, _ := rec.counts()
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	kept := strings.TrimSpace(string(b))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, fail, _ := rec.counts()
		return fail >= failBefore+3, nil
	})
	ok, fail, last := rec.counts()
	if err != nil {
		t.Fatalf("API server stopped: %d failures in 30s, want at least 3", fail-failBefore)
	}
	t.Logf("API server stopped: %d failed attempts, the last: %v", fail-failBefore, last)
	b, _ = os.ReadFile(path)
	// A renewal that was answered before the stop may have landed since.
	if got := strings.TrimSpace(string(b)); got != kept && ok == okBefore {
		t.Error("the token file changed while every attempt failed")
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned while the API server was away: %v", err)
	default:
	}
	if err := c.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		now, _, _ := rec.counts()
		return now > ok, nil
	})
	if err != nil {
		_, _, last := rec.counts()
		t.Fatalf("API server back: no renewal within 60s; last error %v", last)
	}

	// client-go over the file: a client built once moves to the last
	// token by itself (it reads the file again about once a minute).
	stop()
	b, _ = os.ReadFile(path)
	lastClaims, err := kubeclient.ParseToken(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// The agent's client was built at the start, over the first token:
	// ask the API server which token it now sends.
	sees := func(ctx context.Context) (string, error) {
		raw, err := client.Core().Post().AbsPath("/apis/authentication.k8s.io/v1/selfsubjectreviews").
			SetHeader("Content-Type", "application/json").Body([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)).Do(ctx).Raw()
		return string(raw), err
	}
	begin := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 75*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := sees(ctx)
		return err == nil && strings.Contains(raw, "JTI="+lastClaims.ID), nil
	})
	t.Logf("the client built at start sent the last token %s after it was written", time.Since(begin).Round(time.Second))
	if err != nil {
		raw, rerr := sees(ctx)
		t.Errorf("the client built over the tokenFile at start does not send the last token within 75s: %s %v", raw, rerr)
	}
}

func equalExtra(v authenticationv1.ExtraValue, want string) bool {
	return len(v) == 1 && v[0] == want
}
