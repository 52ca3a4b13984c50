package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/server"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// guardedAgent serves /status as the agent does with
// --metrics-tls-cert-file, --metrics-tls-private-key-file and
// --metrics-bearer-token-file, with a certificate made for the test. It
// returns the address, the CA file and the token file.
func guardedAgent(t *testing.T) (addr, ca, token string) {
	t.Helper()
	dir := t.TempDir()
	files, err := testcluster.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	token = filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := server.New("127.0.0.1:0", nil, nil, func() any { return map[string]any{"passes": 3, "threshold": "memory.available<100Mi"} }, nil)
	if err := srv.Secure(server.Access{CertFile: files.Cert, KeyFile: files.Key, TokenFile: token}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return srv.Addr(), files.CA, token
}

func TestStatusTLSAndToken(t *testing.T) {
	addr, ca, token := guardedAgent(t)
	otherCA, err := testcluster.WriteServingCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	// The agent's token, copied where group and others can read it.
	openToken := filepath.Join(t.TempDir(), "open-token")
	if err := os.WriteFile(openToken, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openToken, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string // in stdout when code is 0, else in stderr
	}{
		{"verified, with the token, JSON", []string{"--metrics-ca-file", ca, "--metrics-bearer-token-file", token, "-o", "json"}, 0,
			"{\n  \"passes\": 3,\n  \"threshold\": \"memory.available<100Mi\"\n}\n"},
		// Not the status of a pass: what the agent says before its first.
		{"verified, with the token, table", []string{"--metrics-ca-file", ca, "--metrics-bearer-token-file", token}, 0, "no pass has completed yet"},
		{"without the token", []string{"--metrics-ca-file", ca}, 1, "401 Unauthorized: a bearer token is required (give the agent's token with --metrics-bearer-token-file)"},
		{"plain HTTP", []string{"--metrics-bearer-token-file", token}, 1, "400 Bad Request"},
		{"another CA", []string{"--metrics-ca-file", otherCA.CA, "--metrics-bearer-token-file", token}, 1, "certificate signed by unknown authority"},
		{"system CAs", []string{"--tls", "--metrics-bearer-token-file", token}, 1, "certificate signed by unknown authority"},
		{"missing CA file", []string{"--metrics-ca-file", missing}, 2, `--metrics-ca-file: invalid value "` + missing + `"`},
		{"CA file without a certificate", []string{"--metrics-ca-file", token}, 2, `--metrics-ca-file: invalid value "` + token + `": no PEM certificate in it`},
		{"missing token file", []string{"--metrics-ca-file", ca, "--metrics-bearer-token-file", missing}, 2, `--metrics-bearer-token-file ` + missing + `: no such file or directory`},
		{"token file others can read", []string{"--metrics-ca-file", ca, "--metrics-bearer-token-file", openToken}, 2,
			`evictd status: --metrics-bearer-token-file ` + openToken + `: mode 0644 lets group or others read or write it; chmod 600 it`},
		{"no skipping verification", []string{"--insecure-skip-tls-verify"}, 2, "unknown flag: --insecure-skip-tls-verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := status(append([]string{"--config=", "--metrics-bind-address", addr}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("got exit %d (stdout %q, stderr %q), want %d", code, stdout.String(), stderr.String(), tc.code)
			}
			out := stderr.String()
			if code == 0 {
				out = stdout.String()
			}
			if !strings.Contains(out, tc.contains) {
				t.Errorf("got %q, want it to contain %q", out, tc.contains)
			}
		})
	}
}

// TestStatusReadsTheAgentsConfigFile: status finds the agent where its
// configuration file says it serves, over TLS when it has a certificate,
// with the token the file names; flags given win over the file.
func TestStatusReadsTheAgentsConfigFile(t *testing.T) {
	addr, ca, token := guardedAgent(t)
	dir := filepath.Dir(ca)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte("apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	served := "metricsTLSCertFile: " + filepath.Join(dir, "tls.crt") + "\nmetricsTLSPrivateKeyFile: " + filepath.Join(dir, "tls.key") +
		"\nmetricsBearerTokenFile: " + token + "\n"
	cfg := write("config.yaml", "metricsBindAddress: 0.0.0.0:"+port+"\n"+served)
	bad := write("bad.yaml", "maxEvictionsPerHour: lots\n")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string // in stdout when code is 0, else in stderr
	}{
		{"address, TLS and token from the file", []string{"--config", cfg, "--metrics-ca-file", ca, "-o", "json"}, 0, `"passes": 3`},
		{"a flag wins over the file", []string{"--config", cfg, "--metrics-ca-file", ca, "--metrics-bind-address", "127.0.0.1:1"}, 1, "127.0.0.1:1"},
		{"a bad file is named", []string{"--config", bad}, 2, `--config "` + bad + `": `},
		{"a missing file given is an error", []string{"--config", filepath.Join(dir, "none.yaml")}, 2, "none.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := status(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("got exit %d (stdout %q, stderr %q), want %d", code, stdout.String(), stderr.String(), tc.code)
			}
			out := stderr.String()
			if code == 0 {
				out = stdout.String()
			}
			if !strings.Contains(out, tc.contains) {
				t.Errorf("got %q, want it to contain %q", out, tc.contains)
			}
		})
	}
}

func TestDialAddress(t *testing.T) {
	for bind, want := range map[string]string{
		"127.0.0.1:9847": "127.0.0.1:9847",
		"0.0.0.0:9847":   "127.0.0.1:9847",
		":9847":          "127.0.0.1:9847",
		"[::]:9847":      "[::1]:9847",
		"10.0.0.5:9847":  "10.0.0.5:9847",
		"not an address": "not an address",
	} {
		if got := dialAddress(bind); got != want {
			t.Errorf("dialAddress(%q) = %q, want %q", bind, got, want)
		}
	}
}
