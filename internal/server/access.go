package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/evictd/evictd/internal/secretfile"
)

// Access says how the server guards what it serves beyond the probes.
// The zero value serves plain HTTP to anyone, which is what a loopback
// address wants.
type Access struct {
	// CertFile and KeyFile, both or neither, are the PEM certificate
	// (chain) and private key of the server: with them it serves TLS 1.2
	// or later only. The key file must be mode 0600 or stricter
	// (secretfile.Check); the certificate is public.
	CertFile, KeyFile string
	// TokenFile holds the bearer token that /metrics and /status ask
	// for (Authorization: Bearer <token>); surrounding white space is not
	// part of it. Mode 0600 or stricter. Empty: no token is asked for.
	// /healthz and /readyz stay open, for probes that carry no
	// credentials.
	TokenFile string
	// Delegated, when not nil, has the API server check the bearer
	// token of a request to /metrics or /status (a TokenReview) and
	// whether its user may get that path (a SubjectAccessReview): 401
	// for no token or one the API server does not accept, 403 for a
	// user not allowed, 503 when the API server gives no answer in
	// time. With TokenFile too, either token is accepted: the file's is
	// compared first and never sent to the API server.
	Delegated *Delegation
}

// Secure sets how the server guards its endpoints; call it before Listen
// or Run. It loads the files now and names the one that fails. While the
// server runs it loads them again when they change (reloading): a renewed
// certificate is served, a rotated token asked for, without a restart; a
// rotated file that cannot be used leaves the last good one in use.
func (s *Server) Secure(a Access) error {
	if (a.CertFile == "") != (a.KeyFile == "") {
		return errors.New("a TLS certificate and a private key go together: give both or neither")
	}
	if a.CertFile != "" {
		cert, err := newReloading("TLS certificate and key", []string{a.CertFile, a.KeyFile}, func() (*tls.Certificate, error) {
			return loadKeyPair(a.CertFile, a.KeyFile)
		}, s.clock, s.log)
		if err != nil {
			return err
		}
		s.srv.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return cert.get(), nil
			},
		}
	}
	if a.TokenFile != "" {
		token, err := newReloading("bearer token", []string{a.TokenFile}, func() ([]byte, error) {
			token, err := ReadToken("bearer token file", a.TokenFile)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(token)
			return sum[:], nil
		}, s.clock, s.log)
		if err != nil {
			return err
		}
		s.tokenSum = token
	}
	if a.Delegated != nil {
		d, err := newDelegate(*a.Delegated, s.clock, s.log)
		if err != nil {
			return err
		}
		s.delegate = d
	}
	return nil
}

// loadKeyPair loads a certificate and its key, refusing a key file that
// group or others can read or write.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	if err := secretfile.Check("TLS private key", keyFile); err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	return &cert, nil
}

// ReadToken returns the bearer token in the file at path, without the
// white space around it. An empty token is an error, and so is a file
// that group or others can read or write, or that another user owns
// (secretfile.Check); kind names the file in errors (a flag, or
// "bearer token file").
func ReadToken(kind, path string) ([]byte, error) {
	if err := secretfile.Check(kind, path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	token := bytes.TrimSpace(data)
	if len(token) == 0 {
		return nil, fmt.Errorf("%s %s is empty", kind, path)
	}
	return token, nil
}

// guard lets a request through to h only with a bearer token the server
// accepts, when it asks for one: the token of TokenFile, compared as
// SHA-256 sums in constant time, so neither the token's bytes nor its
// length show in the answer's timing; else, with Delegated, a token the
// API server accepts for a user it allows to get the path.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokenSum == nil && s.delegate == nil {
			h.ServeHTTP(w, r)
			return
		}
		const prefix = "Bearer "
		got := r.Header.Get("Authorization")
		if len(got) <= len(prefix) || got[:len(prefix)] != prefix {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd"`)
			writeText(w, http.StatusUnauthorized, "a bearer token is required")
			return
		}
		token := got[len(prefix):]
		if s.tokenSum != nil {
			sum := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(sum[:], s.tokenSum.get()) == 1 {
				h.ServeHTTP(w, r)
				return
			}
		}
		if s.delegate == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd", error="invalid_token"`)
			writeText(w, http.StatusUnauthorized, "wrong bearer token")
			return
		}
		code, msg := s.delegate.check(r.Context(), token, r.URL.Path)
		switch code {
		case 0:
			h.ServeHTTP(w, r)
			return
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd", error="invalid_token"`)
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "10")
		}
		writeText(w, code, msg)
	})
}
