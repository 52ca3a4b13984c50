package testcluster

import (
	"errors"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// StartForTest starts a cluster for t and stops it when t and its subtests
// end. It skips t when the binaries are not built (except under CI, where
// `make test` builds them, so a missing binary is a failure), and fails t
// when the cluster does not start. If t fails, the last lines of each component's log
// are logged before the cluster is stopped.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), opts)
	if errors.Is(err, ErrNoBinaries) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testcluster: %v", err)
		}
		t.Skipf("testcluster: %v", err)
	}
	if err != nil {
		t.Fatalf("testcluster: start: %v", err)
	}
	t.Logf("testcluster: control plane at %s ready in %s (logs in %s)", c.URL(), c.ReadyIn().Round(time.Millisecond), c.Dir())
	t.Cleanup(func() {
		if t.Failed() {
			logs := c.Logs(40)
			for _, name := range sortedKeys(logs) {
				t.Logf("testcluster: last lines of %s.log:\n%s", name, logs[name])
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("testcluster: stop: %v", err)
		}
	})
	return c
}

// AdminClient returns a clientset with the cluster's admin credentials
// (AdminConfig), failing t if it cannot be made.
func (c *Cluster) AdminClient(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatalf("testcluster: admin client: %v", err)
	}
	return admin
}
