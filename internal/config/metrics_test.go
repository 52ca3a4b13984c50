package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

func TestMetricsAccessFlags(t *testing.T) {
	dir := t.TempDir()
	files, err := testcluster.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	for p, data := range map[string]string{token: "abc\n", empty: "\n"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")
	// A copy of the key and a token that group and others can read.
	openKey, openToken := filepath.Join(dir, "open.key"), filepath.Join(dir, "open-token")
	keyData, err := os.ReadFile(files.Key)
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string][]byte{openKey: keyData, openToken: []byte("abc\n")} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The certificate is public: no mode is asked of it.
	if err := os.Chmod(files.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := complete("--metrics-bind-address=0.0.0.0:9847", "--metrics-tls-cert-file="+files.Cert,
		"--metrics-tls-private-key-file="+files.Key, "--metrics-bearer-token-file="+token)
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsTLSCertFile != files.Cert || c.MetricsTLSPrivateKeyFile != files.Key || c.MetricsBearerTokenFile != token {
		t.Errorf("got cert %q key %q token %q, want the flags' paths", c.MetricsTLSCertFile, c.MetricsTLSPrivateKeyFile, c.MetricsBearerTokenFile)
	}
	if len(c.Notes) != 0 {
		t.Errorf("guarded non-loopback address: got notes %q, want none", c.Notes)
	}
	c, err = complete("--kubeconfig=/etc/evictd/kubeconfig", "--kubeconfig-in-cluster", "--metrics-delegated-auth", "--metrics-bind-address=0.0.0.0:9847",
		"--metrics-tls-cert-file="+files.Cert, "--metrics-tls-private-key-file="+files.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !c.MetricsDelegatedAuth || !c.KubeconfigInCluster || len(c.Notes) != 0 {
		t.Errorf("got delegated %v, in-cluster %v, notes %q; want true, true and no note", c.MetricsDelegatedAuth, c.KubeconfigInCluster, c.Notes)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--metrics-tls-cert-file=" + files.Cert},
			`--metrics-tls-cert-file: invalid value "` + files.Cert + `": needs --metrics-tls-private-key-file too`},
		{"key without cert", []string{"--metrics-tls-private-key-file=" + files.Key},
			`--metrics-tls-private-key-file: invalid value "` + files.Key + `": needs --metrics-tls-cert-file too`},
		{"missing cert", []string{"--metrics-tls-cert-file=" + missing, "--metrics-tls-private-key-file=" + files.Key},
			`--metrics-tls-cert-file: invalid value "` + missing + `": stat ` + missing + `: no such file or directory`},
		{"missing key", []string{"--metrics-tls-cert-file=" + files.Cert, "--metrics-tls-private-key-file=" + missing},
			`--metrics-tls-private-key-file: invalid value "` + missing + `"`},
		{"key that does not match", []string{"--metrics-tls-cert-file=" + files.Cert, "--metrics-tls-private-key-file=" + files.CA},
			`--metrics-tls-cert-file: invalid value "` + files.Cert + `": with --metrics-tls-private-key-file ` + files.CA},
		{"missing token", []string{"--metrics-bearer-token-file=" + missing},
			`--metrics-bearer-token-file: invalid value "` + missing + `"`},
		{"empty token", []string{"--metrics-bearer-token-file=" + empty},
			`--metrics-bearer-token-file: invalid value "` + empty + `": the file holds no token`},
		{"key others can read", []string{"--metrics-tls-cert-file=" + files.Cert, "--metrics-tls-private-key-file=" + openKey},
			`--metrics-tls-private-key-file ` + openKey + `: mode 0644 lets group or others read or write it; chmod 600 it`},
		{"token others can read", []string{"--metrics-bearer-token-file=" + openToken},
			`--metrics-bearer-token-file ` + openToken + `: mode 0644 lets group or others read or write it; chmod 600 it`},
		{"delegated without an API server", []string{"--metrics-delegated-auth"},
			`--metrics-delegated-auth: invalid value "true": needs --kubeconfig: the API server reviews the scrapers' tokens`},
		{"in-cluster without a kubeconfig", []string{"--kubeconfig-in-cluster"},
			`--kubeconfig-in-cluster: invalid value "true": needs --kubeconfig, which names the credentials and the CA`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := complete(tc.args...)
			if !strings.Contains(errText(err), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestMetricsExposureNotes checks the note for an address beyond loopback
// that nothing guards, and its absence on loopback.
func TestMetricsExposureNotes(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // "" means no note about the address
	}{
		{nil, ""},
		{[]string{"--metrics-bind-address=[::1]:9847"}, ""},
		{[]string{"--metrics-bind-address=localhost:9847"}, ""},
		{[]string{"--metrics-bind-address=:9847"}, "neither TLS"},
		{[]string{"--metrics-bind-address=10.0.0.5:9847"}, "neither TLS"},
		{[]string{"--metrics-bind-address=10.0.0.5:9847", "--metrics-bearer-token-file=" + token}, "crosses the network in clear"},
		{[]string{"--metrics-bind-address=10.0.0.5:9847", "--kubeconfig=/k", "--metrics-delegated-auth"}, "crosses the network in clear"},
	} {
		c, err := complete(tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var got string
		for _, n := range c.Notes {
			if strings.Contains(n, "--metrics-bind-address") {
				got = n
			}
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: got note %q, want one with %q", tc.args, got, tc.want)
		}
	}
}
