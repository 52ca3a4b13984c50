package apiserver

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// TestAgentClientMetrics runs the evictd binary with a node-bound token
// against a real kube-apiserver with deploy/ applied, and finds its API
// requests in its own scrape under the kubelet's names: the Lease and the
// pod list and watch in rest_client_requests_total{code,method,host},
// their latency in rest_client_request_duration_seconds{verb,host}. The
// same scrape carries evictd_build_info with its revision, and the landing
// page at / names the endpoints.
func TestAgentClientMetrics(t *testing.T) {
	const node = "client-metrics-node"
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := c.EvictdNodeToken(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: c.URL(), CertificateAuthorityData: c.AdminConfig().CAData}
	kc.AuthInfos["evictd"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "evictd"}
	kc.CurrentContext = "c"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}

	root := "/evictd-client-metrics-" + randomID(t)
	newCgroup(t, t, root, 0)
	newCgroup(t, t, root+"/kubepods", 1<<30)
	addr := testagent.FreeAddr(t)
	testagent.Start(t, nil,
		"--kubeconfig", kubeconfig,
		"--hostname-override", node,
		"--cgroup-root", root,
		"--cgroup-driver", "cgroupfs",
		"--root-dir", t.TempDir(),
		"--container-runtime-endpoint", "unix://"+filepath.Join(t.TempDir(), "no-runtime.sock"),
		"--metrics-bind-address", addr,
		"--log-format", "json")
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")

	// The pod list and the Lease are among the first requests; their
	// series appear once client-go has counted them.
	host := u.Host
	var m map[string]float64
	poll(t, 30*time.Second, "the agent's API requests in its scrape", func() (bool, error) {
		m = testagent.ParseMetrics(t, testagent.WaitHTTP(t, "http://"+addr+"/metrics"))
		return m[`rest_client_requests_total{code="200",host="`+host+`",method="GET"}`] > 0 &&
			m[`rest_client_request_duration_seconds_count{host="`+host+`",verb="GET"}`] > 0, nil
	})
	var requests float64
	for series, v := range m {
		if strings.HasPrefix(series, "rest_client_requests_total{") {
			if !strings.Contains(series, `host="`+host+`"`) {
				t.Errorf("%s: want the API server's host %s", series, host)
			}
			requests += v
		}
	}
	t.Logf("%v requests counted in rest_client_requests_total", requests)

	var build string
	for series := range m {
		if strings.HasPrefix(series, "evictd_build_info{") {
			build = series
		}
	}
	if !strings.Contains(build, `revision="`) || strings.Contains(build, `revision=""`) {
		t.Errorf("evictd_build_info: got %q, want a revision", build)
	}
	page := testagent.WaitHTTP(t, "http://"+addr+"/")
	for _, want := range []string{`<a href="metrics">/metrics</a>`, `<a href="status">/status</a>`, `<a href="healthz">/healthz</a>`, "version "} {
		if !strings.Contains(page, want) {
			t.Errorf("landing page without %q:\n%s", want, page)
		}
	}
}
