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
)

// Access says how the server guards what it serves beyond the probes.
// The zero value serves plain HTTP to anyone, which is what a loopback
// address wants.
type Access struct {
	// CertFile and KeyFile, both or neither, are the PEM certificate
	// (chain) and private key of the server: with them it serves TLS 1.2
	// or later only.
	CertFile, KeyFile string
	// TokenFile holds the bearer token that /metrics and /status ask
	// for (Authorization: Bearer <token>); surrounding white space is not
	// part of it. Empty: no token is asked for. /healthz and /readyz stay
	// open, for probes that carry no credentials.
	TokenFile string
}

// Secure sets how the server guards its endpoints; call it before Listen
// or Run. It loads the files now and names the one that fails.
func (s *Server) Secure(a Access) error {
	if (a.CertFile == "") != (a.KeyFile == "") {
		return errors.New("a TLS certificate and a private key go together: give both or neither")
	}
	if a.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate %s with key %s: %w", a.CertFile, a.KeyFile, err)
		}
		s.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if a.TokenFile != "" {
		token, err := ReadToken(a.TokenFile)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(token)
		s.tokenSum = sum[:]
	}
	return nil
}

// ReadToken returns the bearer token in the file at path, without the
// white space around it; an empty token is an error.
func ReadToken(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bearer token file: %w", err)
	}
	token := bytes.TrimSpace(data)
	if len(token) == 0 {
		return nil, fmt.Errorf("bearer token file %s is empty", path)
	}
	return token, nil
}

// guard lets a request through to h only with the bearer token, when the
// server asks for one. The comparison is of SHA-256 sums in constant time,
// so neither the token's bytes nor its length show in the answer's timing.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokenSum == nil {
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
		sum := sha256.Sum256([]byte(got[len(prefix):]))
		if subtle.ConstantTimeCompare(sum[:], s.tokenSum) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evictd", error="invalid_token"`)
			writeText(w, http.StatusUnauthorized, "wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}
