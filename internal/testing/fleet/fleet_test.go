package fleet

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// The short fleet: enough agents that a per-node habit shows in the API
// server's audit log, idle for long enough that each would have written
// its status a dozen times at the kubelet's 10 s.
const (
	shortNodes = 20
	shortIdle  = 2 * time.Minute
)

// TestFleetIdleBudget runs shortNodes agents (the binary of $EVICTD_BIN) on
// one real API server for shortIdle with nothing happening on their nodes,
// and checks from the audit log that no agent reads its Node, that they
// write their Nodes at most once per node per 5 minutes on average (each
// agent's first write, its state at start, left out) and that none lists
// or watches beyond its node.
func TestFleetIdleBudget(t *testing.T) {
	if os.Getenv(EnvEvictdBin) == "" {
		t.Skipf("%s not set (make build; make test sets it)", EnvEvictdBin)
	}
	if _, err := testcluster.Binary("kube-apiserver"); errors.Is(err, testcluster.ErrNoBinaries) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := t.Context()
	f, err := Start(ctx, Options{Nodes: shortNodes, Dir: t.TempDir(), Seed: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs := f.Cluster.Logs(20)
			t.Logf("last lines of kube-apiserver.log:\n%s", logs["kube-apiserver"])
			t.Logf("last lines of %s's evictd.log:\n%s", f.Nodes[0].Name, childproc.Tail(f.Nodes[0].AgentLog(), 20))
		}
		if err := f.Stop(); err != nil {
			t.Errorf("stop the fleet: %v", err)
		}
	})

	from := time.Now()
	if err := f.StartAgents(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(from.Add(shortIdle))):
	}
	to := time.Now()
	if exited := f.ExitedAgents(); len(exited) > 0 {
		t.Fatalf("agents exited during the idle window: %v", exited)
	}

	reqs, err := ReadAudit(f.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	window := Select(reqs, "", from, to)
	// The agents and kubelets were there: each agent listed its pods and
	// each kubelet renewed its Lease.
	listed, renewed := map[string]bool{}, map[string]bool{}
	for _, r := range window {
		switch {
		case r.Who == Evictd && r.Resource == "pods" && (r.Verb == "list" || r.Verb == "watch"):
			listed[r.Node] = true
		case r.Who == Kubelet && r.Resource == "leases" && r.Verb == "update":
			renewed[r.Node] = true
		}
	}
	if len(listed) != shortNodes || len(renewed) != shortNodes {
		t.Fatalf("in the audit log, %d agents listed their pods and %d kubelets renewed their Lease; want %d of each", len(listed), len(renewed), shortNodes)
	}

	checks := append(CheckIdle(window, shortNodes, from, to, true), CheckNoClusterWide(window))
	for _, c := range checks {
		if c.Pass {
			t.Log(c)
		} else {
			t.Error(c)
		}
	}
	if t.Failed() {
		t.Logf("the agents' requests per node per minute:\n%s", perNodeMinute(Select(window, Evictd, from, to), shortNodes, to.Sub(from)))
	}
}

// perNodeMinute lists reqs by kind, per node per minute.
func perNodeMinute(reqs []Request, nodes int, d time.Duration) string {
	counts := map[string]int{}
	for _, r := range reqs {
		counts[r.Key()]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-28s %6.2f\n", k, float64(counts[k])/float64(nodes)/d.Minutes())
	}
	return b.String()
}
