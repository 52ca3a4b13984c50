package apiserver

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentRenewsItsToken runs the evictd binary as the package does,
// with a kubeconfig naming a token file that holds a token bound to its
// Node (the operator's first token, an hour long), against a real
// kube-apiserver with deploy/ applied: the agent renews the token through
// TokenRequest (--token-renew-before is set so that it does so seconds
// apart), rewriting the file with mode 0600, each new token the
// ServiceAccount's, bound to the same Node, accepted by the API server;
// and the agent keeps renewing its Lease throughout.
func TestAgentRenewsItsToken(t *testing.T) {
	const node = "renew-node"
	c, admin, first := startNodeCluster(t, node)
	ctx := t.Context()
	dir := t.TempDir()
	kubeconfig := writeTokenKubeconfig(t, c, dir, first)
	tokenFile := filepath.Join(dir, "token")
	addr, logs := startNodeAgent(t, "evictd-renew", kubeconfig, node,
		"--lease-duration", "20s",
		// The first token is an hour long, as each successor (its own
		// lifetime): renewed once less than 59m55s is left, 5 s after
		// each was issued.
		"--token-renew-before", "59m55s")

	seen := []string{first}
	poll(t, 90*time.Second, "three renewals of the token file", func() (bool, error) {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return false, err
		}
		if tok := strings.TrimSpace(string(data)); tok != seen[len(seen)-1] {
			seen = append(seen, tok)
		}
		return len(seen) > 3, nil
	})
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	for i, tok := range seen[1:] {
		r, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Status.User
		if !r.Status.Authenticated || u.Username != "system:serviceaccount:kube-system:evictd" ||
			len(u.Extra["authentication.kubernetes.io/node-name"]) != 1 || u.Extra["authentication.kubernetes.io/node-name"][0] != node {
			t.Errorf("renewal %d: authenticated %v as %q with %v, want evictd bound to node %s", i+1, r.Status.Authenticated, u.Username, u.Extra, node)
		}
	}
	if got := renewals(t, addr); got < 3 {
		t.Errorf(`evictd_token_renewals_total{result="renewed"} = %v, want at least 3`, got)
	}
	// The agent goes on: its Lease is renewed after the renewals.
	after := time.Now()
	poll(t, 30*time.Second, "the Lease renewed after the token renewals", func() (bool, error) {
		l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, "evictd-"+node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(after), nil
	})
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("the agent logged errors:\n%s", logs.String())
	}
}

// renewals reads evictd_token_renewals_total{result="renewed"} from the
// agent's /metrics.
func renewals(t *testing.T, addr string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, `evictd_token_renewals_total{result="renewed"} `); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}
