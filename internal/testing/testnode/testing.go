package testnode

import (
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// StartForTest starts a node for t and stops it when t and its subtests
// end. It skips t when not root or when binaries or packages are missing
// (except under CI=true, where `make test` provides them, so it fails), and
// fails t when the node does not start. If t fails, the last lines of every
// component's log are logged before the node is stopped.
func StartForTest(t testing.TB, opts Options) *Node {
	t.Helper()
	n, err := Start(t.Context(), opts)
	if errors.Is(err, ErrNotRoot) || errors.Is(err, testcluster.ErrNoBinaries) || errors.Is(err, testruntime.ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testnode: %v", err)
		}
		t.Skipf("testnode: %v", err)
	}
	if err != nil {
		t.Fatalf("testnode: start: %v", err)
	}
	where := n.Dir()
	if n.Cluster() != nil {
		where += " and " + n.Cluster().Dir()
	}
	t.Logf("testnode: node %s Ready in %s (%s; logs in %s)", n.Name(), n.ReadyIn().Round(time.Millisecond),
		strings.Join(n.Phases(), ", "), where)
	// What the node runs, as it reports itself to the API server.
	lane, _ := testcluster.Lane()
	if node, err := n.Admin().CoreV1().Nodes().Get(t.Context(), n.Name(), metav1.GetOptions{}); err != nil {
		t.Errorf("testnode: get node %s: %v", n.Name(), err)
	} else {
		info := node.Status.NodeInfo
		t.Logf("testnode: node %s runs kubelet %s on %s, kernel %s (lane %q; containerd from %q, \"\" being PATH's)", n.Name(),
			info.KubeletVersion, info.ContainerRuntimeVersion, info.KernelVersion, lane, n.Runtime().BinDir())
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs := n.Logs(40)
			names := make([]string, 0, len(logs))
			for name := range logs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				t.Logf("testnode: last lines of %s's log:\n%s", name, logs[name])
			}
		}
		if err := n.Stop(); err != nil {
			t.Errorf("testnode: stop: %v", err)
		}
	})
	return n
}
