package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/testing/testcluster"

	evictdagent "github.com/evictd/evictd/internal/agent"
)

// secretFile writes data at path with exactly mode.
func secretFile(t *testing.T, path, data string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfigFor writes a kubeconfig whose current context uses user, and
// whose other context uses other (when not nil), with mode.
func kubeconfigFor(t *testing.T, path string, user, other *clientcmdapi.AuthInfo, mode os.FileMode) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["evictd"] = user
	cfg.Contexts["evictd"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "evictd"}
	if other != nil {
		cfg.AuthInfos["other"] = other
		cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "other"}
	}
	cfg.CurrentContext = "evictd"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubeconfigCredentialModes checks agent.RestConfig's refusals: the
// kubeconfig, and the client-key and tokenFile of its current context,
// must be kept from group and others; the certificates are public, and
// another context's files are not used, so not checked.
func TestKubeconfigCredentialModes(t *testing.T) {
	dir := t.TempDir()
	pki, err := testcluster.WriteServingCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keyData, err := os.ReadFile(pki.Key)
	if err != nil {
		t.Fatal(err)
	}
	certData, err := os.ReadFile(pki.Cert)
	if err != nil {
		t.Fatal(err)
	}
	publicCert := secretFile(t, filepath.Join(dir, "client.crt"), string(certData), 0o644)
	privateKey := secretFile(t, filepath.Join(dir, "client.key"), string(keyData), 0o600)
	openKey := secretFile(t, filepath.Join(dir, "open.key"), string(keyData), 0o640)
	privateToken := secretFile(t, filepath.Join(dir, "token"), "t0ken\n", 0o600)
	openToken := secretFile(t, filepath.Join(dir, "open-token"), "t0ken\n", 0o644)
	kc := func(name string) string { return filepath.Join(dir, name+".kubeconfig") }

	for _, tc := range []struct {
		name string
		path string
		want string // "" means accepted
	}{
		{"embedded token", kubeconfigFor(t, kc("embedded"), &clientcmdapi.AuthInfo{Token: "t0ken"}, nil, 0o600), ""},
		{"kubeconfig others can read", kubeconfigFor(t, kc("open"), &clientcmdapi.AuthInfo{Token: "t0ken"}, nil, 0o644),
			"--kubeconfig " + kc("open") + ": mode 0644 lets group or others read or write it; chmod 600 it"},
		{"missing kubeconfig", kc("missing"), "--kubeconfig " + kc("missing") + ": no such file or directory"},
		{"tokenFile 0600", kubeconfigFor(t, kc("tokenfile"), &clientcmdapi.AuthInfo{TokenFile: privateToken}, nil, 0o600), ""},
		{"tokenFile others can read", kubeconfigFor(t, kc("open-tokenfile"), &clientcmdapi.AuthInfo{TokenFile: openToken}, nil, 0o600),
			"--kubeconfig " + kc("open-tokenfile") + ": tokenFile " + openToken + ": mode 0644 lets group or others read or write it; chmod 600 it"},
		// A relative path is taken from the kubeconfig's directory, as
		// client-go takes it, and named in full.
		{"relative tokenFile others can read", kubeconfigFor(t, kc("relative"), &clientcmdapi.AuthInfo{TokenFile: "open-token"}, nil, 0o600),
			"tokenFile " + openToken + ": mode 0644"},
		{"public certificate, private key", kubeconfigFor(t, kc("cert"),
			&clientcmdapi.AuthInfo{ClientCertificate: publicCert, ClientKey: privateKey}, nil, 0o600), ""},
		{"client-key others can read", kubeconfigFor(t, kc("open-key"),
			&clientcmdapi.AuthInfo{ClientCertificate: publicCert, ClientKey: openKey}, nil, 0o600),
			"--kubeconfig " + kc("open-key") + ": client-key " + openKey + ": mode 0640 lets group or others read or write it; chmod 600 it"},
		{"another context's open token is not used", kubeconfigFor(t, kc("other"),
			&clientcmdapi.AuthInfo{TokenFile: privateToken}, &clientcmdapi.AuthInfo{TokenFile: openToken}, 0o600), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evictdagent.RestConfig(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRefusesOpenKubeconfig checks that check-config and the agent refuse
// a kubeconfig others can read, naming it and its mode, and exit non-zero
// before the agent does anything else.
func TestRefusesOpenKubeconfig(t *testing.T) {
	path := kubeconfigFor(t, filepath.Join(t.TempDir(), "kubeconfig"), &clientcmdapi.AuthInfo{Token: "t0ken"}, nil, 0o604)
	want := "--kubeconfig " + path + ": mode 0604 lets group or others read or write it; chmod 600 it"
	for _, args := range [][]string{
		{"check-config", "--kubeconfig", path},
		{"--kubeconfig", path, "--metrics-bind-address=127.0.0.1:0", "--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock"},
	} {
		_, errOut, code := runCmd(args...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("evictd %v: got exit %d, stderr %q; want exit 1 and %q", args, code, errOut, want)
		}
	}
}

// TestOptionalKubeconfig: a --kubeconfig that does not exist is an error,
// unless --kubeconfig-optional is set: check-config then warns that the
// agent would start standalone (on stderr, as every warning) and exits 0. An optional kubeconfig that
// exists is checked as any other.
func TestOptionalKubeconfig(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "kubeconfig")
	open := kubeconfigFor(t, filepath.Join(dir, "open"), &clientcmdapi.AuthInfo{Token: "t0ken"}, nil, 0o644)
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{"missing, required", []string{"--kubeconfig", missing}, 1, "", "--kubeconfig " + missing + ": "},
		{"missing, optional", []string{"--kubeconfig", missing, "--kubeconfig-optional"}, 0,
			"", "warning: --kubeconfig " + missing + " does not exist yet and --kubeconfig-optional is set: the agent would start standalone, with no API server, evicting nothing, until it is written and evictd restarted.\n"},
		{"there but too open, optional", []string{"--kubeconfig", open, "--kubeconfig-optional"}, 1, "",
			"--kubeconfig " + open + ": mode 0644 lets group or others read or write it; chmod 600 it"},
		{"optional without a kubeconfig", []string{"--kubeconfig-optional"}, 0,
			"", "note: --kubeconfig-optional has no effect without --kubeconfig: evictd runs standalone.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"check-config", "--hostname-override=n1"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, %q in stdout, %q in stderr", code, out, errOut, tc.code, tc.wantOut, tc.wantErr)
			}
		})
	}
}
