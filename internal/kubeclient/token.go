package kubeclient

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxTokenLifetime is the longest lifetime evictd asks a renewed token
// for: 720h, the lifetime of the first token deploy/README.md mints, and
// the most deploy/policy.yaml lets evictd's identity ask for.
const MaxTokenLifetime = 720 * time.Hour

// MinTokenLifetime is the shortest lifetime the API server grants a
// TokenRequest (10 minutes).
const MinTokenLifetime = 10 * time.Minute

// TokenClaims is what evictd reads of a ServiceAccount token's claims,
// decoded without checking the signature: the API server checks it; this
// only says which token to ask for next and when.
type TokenClaims struct {
	// Audiences is the aud claim.
	Audiences []string
	// IssuedAt and Expiry are the iat and exp claims; IssuedAt is zero
	// when the token has none.
	IssuedAt, Expiry time.Time
	// ID is the jti claim, which the API server shows as the user's extra
	// authentication.kubernetes.io/credential-id (JTI=<id>).
	ID string
	// Namespace and ServiceAccount name the token's ServiceAccount.
	Namespace, ServiceAccount string
	// Node and NodeUID name the Node the token is bound to, or the node of
	// the Pod it is bound to; empty for a token bound to neither.
	Node, NodeUID string
	// Pod and Secret name the Pod or Secret the token is bound to; empty
	// when it is not.
	Pod, Secret string
}

// ParseToken reads the claims of a ServiceAccount token (a JWT), trimmed
// of surrounding white space. An error says what is wrong without quoting
// the token.
func ParseToken(tok string) (TokenClaims, error) {
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		return TokenClaims{}, fmt.Errorf("not a JWT: %d dot-separated parts, want 3", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return TokenClaims{}, fmt.Errorf("not a JWT: claims are not base64url: %w", err)
	}
	type ref struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	}
	var raw struct {
		Aud json.RawMessage `json:"aud"`
		Exp *json.Number    `json:"exp"`
		Iat *json.Number    `json:"iat"`
		Jti string          `json:"jti"`
		K8s *struct {
			Namespace      string `json:"namespace"`
			ServiceAccount *ref   `json:"serviceaccount"`
			Node           *ref   `json:"node"`
			Pod            *ref   `json:"pod"`
			Secret         *ref   `json:"secret"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return TokenClaims{}, fmt.Errorf("not a JWT: claims are not a JSON object: %w", err)
	}
	var c TokenClaims
	if c.Expiry, err = unixClaim("exp", raw.Exp); err != nil {
		return TokenClaims{}, err
	}
	if c.Expiry.IsZero() {
		return TokenClaims{}, errors.New("the token has no exp claim")
	}
	if c.IssuedAt, err = unixClaim("iat", raw.Iat); err != nil {
		return TokenClaims{}, err
	}
	// aud is a string or an array of strings (RFC 7519 section 4.1.3).
	if len(raw.Aud) > 0 && string(raw.Aud) != "null" {
		var one string
		if json.Unmarshal(raw.Aud, &one) == nil {
			c.Audiences = []string{one}
		} else if err := json.Unmarshal(raw.Aud, &c.Audiences); err != nil {
			return TokenClaims{}, fmt.Errorf("claim aud %s: want a string or an array of strings", raw.Aud)
		}
	}
	c.ID = raw.Jti
	if k := raw.K8s; k != nil {
		c.Namespace = k.Namespace
		if k.ServiceAccount != nil {
			c.ServiceAccount = k.ServiceAccount.Name
		}
		if k.Node != nil {
			c.Node, c.NodeUID = k.Node.Name, k.Node.UID
		}
		if k.Pod != nil {
			c.Pod = k.Pod.Name
		}
		if k.Secret != nil {
			c.Secret = k.Secret.Name
		}
	}
	return c, nil
}

// unixClaim reads a NumericDate claim; nil is the zero time.
func unixClaim(name string, n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, nil
	}
	f, err := n.Float64()
	if err != nil || f <= 0 {
		return time.Time{}, fmt.Errorf("claim %s %q: want a positive number of seconds since the epoch", name, n.String())
	}
	return time.Unix(int64(f), 0), nil
}

// NodeBound returns nil if c is a ServiceAccount token bound to a Node
// object itself (kubectl create token --bound-object-kind Node), the
// kind evictd renews; otherwise an error that says what it is instead.
// A token bound to a Pod carries its node too (the kubelet renews those),
// and a legacy or Secret-bound one has no node.
func (c TokenClaims) NodeBound() error {
	switch {
	case c.Namespace == "" || c.ServiceAccount == "":
		return errors.New("not a ServiceAccount token (no kubernetes.io namespace and serviceaccount claims)")
	case c.Pod != "":
		return fmt.Errorf("bound to pod %s/%s, not to a Node: the kubelet renews such tokens", c.Namespace, c.Pod)
	case c.Secret != "":
		return fmt.Errorf("bound to secret %s/%s, not to a Node", c.Namespace, c.Secret)
	case c.Node == "":
		return errors.New("bound to no Node")
	case c.NodeUID == "":
		return fmt.Errorf("bound to node %s without its uid", c.Node)
	}
	return nil
}

// Lifetime is how long c was issued for (exp − iat), or 0 without iat.
func (c TokenClaims) Lifetime() time.Duration {
	if c.IssuedAt.IsZero() || !c.Expiry.After(c.IssuedAt) {
		return 0
	}
	return c.Expiry.Sub(c.IssuedAt)
}

// RenewAt is when a token with claims c is renewed: before ahead of its
// expiry, or, when before is 0, once a third of its lifetime is left (a
// 720h token at 240h left, three days before the alert
// EvictdCredentialExpiringSoon's 7 days). A token without iat is renewed
// a day before it expires, when before is 0.
func RenewAt(c TokenClaims, before time.Duration) time.Time {
	if before <= 0 {
		if l := c.Lifetime(); l > 0 {
			before = l / 3
		} else {
			before = 24 * time.Hour
		}
	}
	return c.Expiry.Add(-before)
}

// NextLifetime is the lifetime to ask for c's successor: want when set,
// else c's own lifetime, within [MinTokenLifetime, MaxTokenLifetime]; a
// token without iat gets MaxTokenLifetime.
func NextLifetime(c TokenClaims, want time.Duration) time.Duration {
	l := want
	if l <= 0 {
		l = c.Lifetime()
	}
	if l <= 0 {
		l = MaxTokenLifetime
	}
	return min(max(l, MinTokenLifetime), MaxTokenLifetime)
}
