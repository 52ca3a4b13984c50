package ranking

import (
	"slices"
	"testing"

	"github.com/evictd/evictd/signals"
)

const (
	Ki int64 = 1 << 10
	Mi int64 = 1 << 20
	Gi int64 = 1 << 30
)

type podOpt func(*signals.Pod)

// mk builds a pod in namespace "default" whose UID is "uid-"+name.
func mk(name string, qos signals.QOSClass, opts ...podOpt) signals.Pod {
	p := signals.Pod{Namespace: "default", Name: name, UID: "uid-" + name, QOS: qos}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func prio(n int32) podOpt      { return func(p *signals.Pod) { p.Priority = n } }
func memReq(b int64) podOpt    { return func(p *signals.Pod) { p.MemoryRequest = b } }
func ephReq(b int64) podOpt    { return func(p *signals.Pod) { p.EphemeralStorageRequest = b } }
func inNS(ns string) podOpt    { return func(p *signals.Pod) { p.Namespace = ns } }
func uid(u string) podOpt      { return func(p *signals.Pod) { p.UID = u } }
func vols(v ...string) podOpt  { return func(p *signals.Pod) { p.LocalVolumes = v } }
func daemonSet(p *signals.Pod) { p.DaemonSet = true }
func static(p *signals.Pod)    { p.Static = true }
func mirror(p *signals.Pod)    { p.Mirror = true }

// guaranteed builds a Guaranteed pod whose memory request is req.
func guaranteed(name string, req int64, opts ...podOpt) signals.Pod {
	return mk(name, signals.Guaranteed, append([]podOpt{memReq(req)}, opts...)...)
}

// ws is the stats of pod name with a memory working set of v bytes.
func ws(name string, v int64) signals.PodStats {
	return signals.PodStats{UID: "uid-" + name, MemoryWorkingSet: signals.Int64(v)}
}

// procs is the stats of pod name with n processes.
func procs(name string, n int64) signals.PodStats {
	return signals.PodStats{UID: "uid-" + name, Processes: signals.Int64(n)}
}

// byUID keys stats by their UID, as the agent does.
func byUID(ss ...signals.PodStats) map[string]signals.PodStats {
	m := make(map[string]signals.PodStats, len(ss))
	for _, s := range ss {
		m[s.UID] = s
	}
	return m
}

func names(cands []Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Pod.Name
	}
	return out
}

func find(t *testing.T, cands []Candidate, name string) Candidate {
	t.Helper()
	i := slices.IndexFunc(cands, func(c Candidate) bool { return c.Pod.Name == name })
	if i < 0 {
		t.Fatalf("pod %s not among candidates %v", name, names(cands))
	}
	return cands[i]
}

// rankCase is one row of the ranking tables.
type rankCase struct {
	name   string
	sig    signals.Signal
	layout signals.FsLayout
	pods   []signals.Pod
	stats  map[string]signals.PodStats
	want   []string
	// first is the pod FirstEvictable returns ("" = none).
	first string
	// keys maps a pod name to its exact expected Key.
	keys map[string]string
}

func runRankCases(t *testing.T, cases []rankCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Rank(tc.sig, tc.layout, tc.pods, tc.stats)
			if g := names(got); !slices.Equal(g, tc.want) {
				t.Errorf("order: got %v, want %v", g, tc.want)
				for _, c := range got {
					t.Logf("  %s tier=%s key=%q skip=%q", c.Pod.Name, c.Tier, c.Key, c.Skip)
				}
			}
			c, ok := FirstEvictable(got)
			switch {
			case tc.first == "" && ok:
				t.Errorf("FirstEvictable: got %s, want none", c.Pod.Name)
			case tc.first != "" && !ok:
				t.Errorf("FirstEvictable: got none, want %s", tc.first)
			case tc.first != "" && c.Pod.Name != tc.first:
				t.Errorf("FirstEvictable: got %s, want %s", c.Pod.Name, tc.first)
			}
			for name, want := range tc.keys {
				if k := find(t, got, name).Key; k != want {
					t.Errorf("key of %s: got %q, want %q", name, k, want)
				}
			}
		})
	}
}
