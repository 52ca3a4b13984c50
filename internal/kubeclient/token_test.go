package kubeclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// nodeClaims is the payload of a token of kube-system/evictd bound to node
// n1 (uid u1), issued at iat for lifetime.
func nodeClaims(iat int64, lifetime time.Duration) string {
	return fmt.Sprintf(`{"aud":["https://kubernetes.default.svc"],"exp":%d,"iat":%d,"jti":"j-%d","kubernetes.io":{"namespace":"kube-system",`+
		`"node":{"name":"n1","uid":"u1"},"serviceaccount":{"name":"evictd","uid":"sa1"}},"sub":"system:serviceaccount:kube-system:evictd"}`,
		iat+int64(lifetime/time.Second), iat, iat)
}

func TestParseToken(t *testing.T) {
	iat := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		tok     string
		want    TokenClaims
		wantErr string
		bound   string // NodeBound's error, "" for nil
	}{
		{"node-bound", fakeJWT(nodeClaims(iat.Unix(), 720*time.Hour)) + "\n", TokenClaims{
			Audiences: []string{"https://kubernetes.default.svc"}, IssuedAt: iat, Expiry: iat.Add(720 * time.Hour), ID: fmt.Sprintf("j-%d", iat.Unix()),
			Namespace: "kube-system", ServiceAccount: "evictd", Node: "n1", NodeUID: "u1",
		}, "", ""},
		{"pod-bound, with its node", fakeJWT(`{"aud":"api","exp":1798214400,"kubernetes.io":{"namespace":"kube-system","node":{"name":"n1","uid":"u1"},"pod":{"name":"evictd-x","uid":"p"},"serviceaccount":{"name":"evictd","uid":"s"}}}`),
			TokenClaims{Audiences: []string{"api"}, Expiry: time.Unix(1798214400, 0), Namespace: "kube-system", ServiceAccount: "evictd", Node: "n1", NodeUID: "u1", Pod: "evictd-x"},
			"", "bound to pod kube-system/evictd-x, not to a Node"},
		{"secret-bound", fakeJWT(`{"exp":1798214400,"kubernetes.io":{"namespace":"kube-system","secret":{"name":"s1"},"serviceaccount":{"name":"evictd"}}}`),
			TokenClaims{Expiry: time.Unix(1798214400, 0), Namespace: "kube-system", ServiceAccount: "evictd", Secret: "s1"}, "", "bound to secret kube-system/s1"},
		{"bound to nothing", fakeJWT(`{"exp":1798214400,"kubernetes.io":{"namespace":"kube-system","serviceaccount":{"name":"evictd"}}}`),
			TokenClaims{Expiry: time.Unix(1798214400, 0), Namespace: "kube-system", ServiceAccount: "evictd"}, "", "bound to no Node"},
		{"node without uid", fakeJWT(`{"exp":1798214400,"kubernetes.io":{"namespace":"kube-system","node":{"name":"n1"},"serviceaccount":{"name":"evictd"}}}`),
			TokenClaims{Expiry: time.Unix(1798214400, 0), Namespace: "kube-system", ServiceAccount: "evictd", Node: "n1"}, "", "bound to node n1 without its uid"},
		{"not a ServiceAccount's", fakeJWT(`{"exp":1798214400,"sub":"someone"}`), TokenClaims{Expiry: time.Unix(1798214400, 0)}, "", "not a ServiceAccount token"},
		{"opaque", "0123456789abcdef", TokenClaims{}, "not a JWT: 1 dot-separated parts, want 3", ""},
		{"claims not base64", "a.!!!.c", TokenClaims{}, "claims are not base64url", ""},
		{"claims not JSON", fakeJWT("not json"), TokenClaims{}, "claims are not a JSON object", ""},
		{"no exp", fakeJWT(`{"sub":"x"}`), TokenClaims{}, "no exp claim", ""},
		{"exp not a number", fakeJWT(`{"exp":"soon"}`), TokenClaims{}, "claims are not a JSON object", ""},
		{"negative exp", fakeJWT(`{"exp":-5}`), TokenClaims{}, `claim exp "-5"`, ""},
		{"aud a number", fakeJWT(`{"exp":5,"aud":7}`), TokenClaims{}, "claim aud 7: want a string or an array of strings", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseToken(tc.tok)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Audiences, tc.want.Audiences) || !got.IssuedAt.Equal(tc.want.IssuedAt) || !got.Expiry.Equal(tc.want.Expiry) ||
				got.ID != tc.want.ID || got.Namespace != tc.want.Namespace || got.ServiceAccount != tc.want.ServiceAccount ||
				got.Node != tc.want.Node || got.NodeUID != tc.want.NodeUID || got.Pod != tc.want.Pod || got.Secret != tc.want.Secret {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			err = got.NodeBound()
			switch {
			case tc.bound == "" && err != nil:
				t.Errorf("NodeBound: got %v, want nil", err)
			case tc.bound != "" && (err == nil || !strings.Contains(err.Error(), tc.bound)):
				t.Errorf("NodeBound: got %v, want an error with %q", err, tc.bound)
			}
		})
	}
}

func TestRenewAtAndLifetime(t *testing.T) {
	iat := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	claims := func(lifetime time.Duration) TokenClaims {
		return TokenClaims{IssuedAt: iat, Expiry: iat.Add(lifetime)}
	}
	noIat := TokenClaims{Expiry: iat.Add(720 * time.Hour)}
	tests := []struct {
		name         string
		c            TokenClaims
		before, want time.Duration // want: the lifetime asked for
		flagLifetime time.Duration
		renewAt      time.Time
	}{
		{"720h, defaults: at 240h left, for 720h", claims(720 * time.Hour), 0, 720 * time.Hour, 0, iat.Add(480 * time.Hour)},
		{"24h, defaults: at 8h left, for 24h", claims(24 * time.Hour), 0, 24 * time.Hour, 0, iat.Add(16 * time.Hour)},
		{"10m, renew 9m55s before: 5s after issue", claims(10 * time.Minute), 9*time.Minute + 55*time.Second, 10 * time.Minute, 0, iat.Add(5 * time.Second)},
		{"8760h: asked for 720h at most", claims(8760 * time.Hour), 0, 720 * time.Hour, 0, iat.Add(8760 * time.Hour * 2 / 3)},
		{"lifetime flag wins", claims(720 * time.Hour), 48 * time.Hour, 48 * time.Hour, 48 * time.Hour, iat.Add(672 * time.Hour)},
		{"lifetime flag below the API server's minimum", claims(720 * time.Hour), 0, 10 * time.Minute, time.Minute, iat.Add(480 * time.Hour)},
		{"no iat: a day before, for 720h", noIat, 0, 720 * time.Hour, 0, iat.Add(696 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RenewAt(tc.c, tc.before); !got.Equal(tc.renewAt) {
				t.Errorf("RenewAt: got %v, want %v", got, tc.renewAt)
			}
			if got := NextLifetime(tc.c, tc.flagLifetime); got != tc.want {
				t.Errorf("NextLifetime: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRequestTokenAnswers: what is sent, and the API server's broken
// answers each an error that says so.
func TestRequestTokenAnswers(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		answer string
		want   string // "" for success
	}{
		{"a token", 201, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","status":{"token":"a.b.c","expirationTimestamp":"2026-12-01T00:00:00Z"}}`, ""},
		{"no token", 201, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","status":{}}`, "the API server's answer holds no token"},
		{"not JSON", 201, `<html>proxy error</html>`, "the API server's answer is not a TokenRequest"},
		{"refused", 403, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"denied by the test"}`, "denied by the test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			var sent map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				_ = json.NewDecoder(r.Body).Decode(&sent)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			c, err := NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := c.RequestToken(t.Context(), TokenRequest{Namespace: "kube-system", ServiceAccount: "evictd", Audiences: []string{"api"}, Lifetime: time.Hour, Node: "n1", NodeUID: "u1"})
			if path != "/api/v1/namespaces/kube-system/serviceaccounts/evictd/token" {
				t.Errorf("posted to %s", path)
			}
			spec, _ := json.Marshal(sent["spec"])
			if want := `{"audiences":["api"],"boundObjectRef":{"apiVersion":"v1","kind":"Node","name":"n1","uid":"u1"},"expirationSeconds":3600}`; string(spec) != want {
				t.Errorf("sent spec %s, want %s", spec, want)
			}
			switch {
			case tc.want == "" && (err != nil || tok != "a.b.c"):
				t.Errorf("got %q, %v; want a.b.c", tok, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kube-system/evictd")):
				t.Errorf("got %q, %v; want an error naming kube-system/evictd with %q", tok, err, tc.want)
			}
		})
	}
}
