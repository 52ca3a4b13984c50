package tokenrenew

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/kubeclient"
)

// fakeJWT is a JWT with this payload and a signature no one checks here.
func fakeJWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("signature"))
}

// nodeClaims is the payload of a token of kube-system/evictd bound to node
// n1 (uid u1), issued at iat for lifetime.
func nodeClaims(iat int64, lifetime time.Duration) string {
	return fmt.Sprintf(`{"aud":["https://kubernetes.default.svc"],"exp":%d,"iat":%d,"jti":"j-%d","kubernetes.io":{"namespace":"kube-system",`+
		`"node":{"name":"n1","uid":"u1"},"serviceaccount":{"name":"evictd","uid":"sa1"}},"sub":"system:serviceaccount:kube-system:evictd"}`,
		iat+int64(lifetime/time.Second), iat, iat)
}

// fakeRequester answers TokenRequests with tokens it makes, or with err.
type fakeRequester struct {
	now  func() time.Time
	err  error
	asks []kubeclient.TokenRequest
}

func (f *fakeRequester) RequestToken(_ context.Context, r kubeclient.TokenRequest) (string, error) {
	f.asks = append(f.asks, r)
	if f.err != nil {
		return "", f.err
	}
	return fakeJWT(nodeClaims(f.now().Unix(), r.Lifetime)), nil
}

// TestRenewerStep: a token not due is left alone; a due one is replaced
// by the API server's answer, mode 0600; a failure keeps the old token;
// a file someone else rewrote is not overwritten; a file others can read
// is refused.
func TestRenewerStep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	iat := time.Now().Add(-time.Hour).Truncate(time.Second)
	old := fakeJWT(nodeClaims(iat.Unix(), 3*time.Hour))
	if err := os.WriteFile(path, []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := &fakeRequester{now: time.Now}
	r, err := NewRenewer(RenewerConfig{Path: path, RenewBefore: time.Hour}, api)
	if err != nil {
		t.Fatal(err)
	}
	// Due in an hour.
	if wait, renewed, err := r.step(t.Context()); err != nil || renewed || wait < 59*time.Minute || wait > time.Hour {
		t.Fatalf("not due: got %v, %v, %v; want about 1h, false, nil", wait, renewed, err)
	}
	// Due now: 2h30m before expiry.
	r.cfg.RenewBefore = 150 * time.Minute
	api.err = errors.New("connection refused")
	if _, _, err := r.step(t.Context()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("API server away: got %v, want its error", err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != old {
		t.Fatal("a failed renewal changed the file")
	}
	api.err = nil
	if _, renewed, err := r.step(t.Context()); err != nil || !renewed {
		t.Fatalf("due: got %v, %v; want renewed", renewed, err)
	}
	ask := api.asks[len(api.asks)-1]
	if ask.Namespace != "kube-system" || ask.ServiceAccount != "evictd" || ask.Node != "n1" || ask.NodeUID != "u1" ||
		ask.Lifetime != 3*time.Hour || !slices.Equal(ask.Audiences, []string{"https://kubernetes.default.svc"}) {
		t.Errorf("asked %+v; want kube-system/evictd bound to n1 (u1), 3h, the old audiences", ask)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if fi.Mode().Perm() != 0o600 || strings.TrimSpace(string(b)) == old {
		t.Errorf("after renewal: mode %04o, token changed %v; want 0600, true", fi.Mode().Perm(), strings.TrimSpace(string(b)) != old)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".token.new-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// Someone else wrote the file meanwhile: not overwritten.
	if err := replaceToken(path, old, "x.y.z"); !errors.Is(err, errChanged) {
		t.Errorf("file changed since read: got %v, want errChanged", err)
	}
	// Open to others: refused, before and at the write.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.step(t.Context()); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("mode 0644: got %v, want a refusal", err)
	}
	if err := replaceToken(path, strings.TrimSpace(string(b)), "x.y.z"); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("mode 0644 at the write: got %v, want a refusal", err)
	}
}

func TestNewRenewerRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"opaque", "0123456789abcdef", "not a JWT"},
		{"pod-bound", fakeJWT(`{"exp":1798214400,"kubernetes.io":{"namespace":"kube-system","node":{"name":"n1","uid":"u1"},"pod":{"name":"p"},"serviceaccount":{"name":"evictd"}}}`), "the kubelet renews such tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewRenewer(RenewerConfig{Path: p}, &fakeRequester{now: time.Now})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("got %v, want an error naming %s with %q", err, p, tc.want)
			}
		})
	}
}
