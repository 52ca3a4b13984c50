package kubeclient

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Expiry is when the credentials rc authenticates with expire, read again
// at each call (client-go re-reads a tokenFile about every minute and a
// client certificate on new connections, so a rotated file is what
// counts). A zero time is a credential rc does not have, or whose expiry
// cannot be known: an opaque (non-JWT) token, a JWT without exp, a file
// that cannot be read or parsed. The token is a ServiceAccount token's
// JWT, decoded without checking its signature: the API server checks it,
// this only reads when it will stop doing so.
func Expiry(rc *rest.Config) (token, clientCert time.Time) {
	tok := rc.BearerToken
	if rc.BearerTokenFile != "" {
		if b, err := os.ReadFile(rc.BearerTokenFile); err == nil {
			tok = string(b)
		}
	}
	token = jwtExpiry(strings.TrimSpace(tok))

	certPEM := rc.CertData
	if rc.CertFile != "" {
		if b, err := os.ReadFile(rc.CertFile); err == nil {
			certPEM = b
		}
	}
	clientCert = certExpiry(certPEM)
	return token, clientCert
}

// jwtExpiry is the exp claim of a JWT, or zero.
func jwtExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}
	}
	exp, err := claims.Exp.Int64()
	if err != nil || exp <= 0 {
		return time.Time{}
	}
	return time.Unix(exp, 0)
}

// certExpiry is the NotAfter of the first certificate in a PEM bundle (the
// client's own; intermediates follow it), or zero.
func certExpiry(b []byte) time.Time {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}
