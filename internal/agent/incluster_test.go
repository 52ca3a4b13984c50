package agent

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

func TestInClusterServer(t *testing.T) {
	for _, tc := range []struct {
		name, host, port string
		want, wantErr    string
	}{
		{"IPv4", "10.96.0.1", "443", "https://10.96.0.1:443", ""},
		{"IPv6 in brackets", "fd00::1", "6443", "https://[fd00::1]:6443", ""},
		{"host name", "api.cluster.example", "443", "https://api.cluster.example:443", ""},
		{"neither", "", "", "", "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"},
		{"no host", "", "443", "", "KUBERNETES_SERVICE_HOST is not set"},
		{"no port", "10.96.0.1", "", "", "KUBERNETES_SERVICE_PORT is not set"},
		{"named port", "10.96.0.1", "https", "", `KUBERNETES_SERVICE_PORT "https" is not a port number`},
		{"port 0", "10.96.0.1", "0", "", `KUBERNETES_SERVICE_PORT "0" is not a port number`},
		{"port too big", "10.96.0.1", "70000", "", `KUBERNETES_SERVICE_PORT "70000"`},
		{"host with a path", "10.96.0.1/x", "443", "", `KUBERNETES_SERVICE_HOST "10.96.0.1/x" is not an IP address or host name`},
		{"host with a port", "10.96.0.1:443", "443", "", `KUBERNETES_SERVICE_HOST "10.96.0.1:443"`},
		{"host with a user", "evil@10.96.0.1", "443", "", `KUBERNETES_SERVICE_HOST "evil@10.96.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"KUBERNETES_SERVICE_HOST": tc.host, "KUBERNETES_SERVICE_PORT": tc.port}
			got, err := InClusterServer(func(k string) string { return env[k] })
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %q, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}

// TestKubeconfigInCluster reaches a real API server through the
// environment's KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT with
// the credentials and CA of a kubeconfig whose own server does not
// resolve, as deploy/daemonset.yaml's; a token file others can read is
// still refused.
func TestKubeconfigInCluster(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	token, err := c.EvictdToken(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: https://kubernetes.default.svc.invalid
    certificate-authority: ` + c.CAFile() + `
users:
- name: evictd
  user:
    tokenFile: ` + tokenFile + `
contexts:
- name: evictd
  context: {cluster: cluster, user: evictd}
current-context: evictd
`
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBERNETES_SERVICE_HOST": u.Hostname(), "KUBERNETES_SERVICE_PORT": u.Port()}
	getenv := func(k string) string { return env[k] }
	cfg := &config.Config{Kubeconfig: kubeconfig, KubeconfigInCluster: true}

	rc, err := KubeRestConfig(cfg, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != c.URL() || rc.BearerTokenFile != tokenFile {
		t.Errorf("got server %q, token file %q; want %q and %q", rc.Host, rc.BearerTokenFile, c.URL(), tokenFile)
	}
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// A list of the nodes, which deploy/rbac.yaml grants evictd's
	// ServiceAccount alone: the API server was reached, its certificate
	// checked against the kubeconfig's CA, the token file read and
	// accepted.
	if _, err := client.Nodes().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list nodes through the in-cluster address: %v", err)
	}

	// The checks of the credentials still apply.
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := KubeRestConfig(cfg, getenv); err == nil || !strings.Contains(err.Error(), "tokenFile") {
		t.Errorf("token file mode 0644: got %v, want a refusal naming the tokenFile", err)
	}
	if err := os.Chmod(tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	// Outside a pod: an error naming the variables.
	if _, err := KubeRestConfig(cfg, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--kubeconfig-in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set") {
		t.Errorf("no environment: got %v", err)
	}
}
