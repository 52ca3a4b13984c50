package apiserver

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// startNodeCluster starts a real kube-apiserver for t, creates the Node
// node in it and returns the cluster, an admin client and evictd's
// production identity on node: a token of the kube-system/evictd
// ServiceAccount bound to that Node, with deploy/ applied.
func startNodeCluster(t *testing.T, node string) (*testcluster.Cluster, kubernetes.Interface, string) {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", node, err)
	}
	token, err := c.EvictdNodeToken(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	return c, admin, token
}

// writeTokenKubeconfig writes token to dir/token and a kubeconfig naming
// it as its tokenFile, both mode 0600, as the package's node install does.
func writeTokenKubeconfig(t *testing.T, c *testcluster.Cluster, dir, token string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile, path := filepath.Join(dir, "token"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.URL(), CertificateAuthority: c.CAFile()}
	cfg.AuthInfos["evictd"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["evictd"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "evictd"}
	cfg.CurrentContext = "evictd"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startNodeAgent runs the evictd binary as node with kubeconfig, under a
// cgroup root of its own (/<prefix>-<random>, with a 1 GiB kubepods
// below it), no container runtime and JSON logs, plus extra flags, and
// waits until it is ready. It returns the address of its metrics
// endpoint and its log.
func startNodeAgent(t *testing.T, prefix, kubeconfig, node string, extra ...string) (string, *testagent.Log) {
	t.Helper()
	root := "/" + prefix + "-" + randomID(t)
	newCgroup(t, t, root, 0)
	newCgroup(t, t, root+"/kubepods", 1<<30)
	addr := testagent.FreeAddr(t)
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--hostname-override", node,
		"--cgroup-root", root,
		"--cgroup-driver", "cgroupfs",
		"--root-dir", t.TempDir(),
		"--container-runtime-endpoint", "unix://" + filepath.Join(t.TempDir(), "no-runtime.sock"),
		"--metrics-bind-address", addr,
		"--log-format", "json",
	}, extra...)
	_, logs := testagent.Start(t, nil, args...)
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")
	return addr, logs
}
