package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/testing/fleet"
)

const mib = 1 << 20

// side is the requests of one kind of client in a window.
type side struct {
	reqs  []fleet.Request
	all   []fleet.Request // of the whole run, for the watches open at a time
	nodes int
	mins  float64
}

func newSide(reqs []fleet.Request, who fleet.Who, w *window, nodes int) side {
	return side{
		reqs:  fleet.Select(reqs, who, w.from, w.to),
		all:   fleet.Select(reqs, who, time.Time{}, w.to.Add(time.Hour)),
		nodes: nodes, mins: w.to.Sub(w.from).Minutes(),
	}
}

// perNodeMin is count per node per minute.
func (s side) perNodeMin(count int) float64 { return float64(count) / float64(s.nodes) / s.mins }

func (s side) byKey() map[string]int {
	m := map[string]int{}
	for _, r := range s.reqs {
		m[r.Key()]++
	}
	return m
}

func (s side) count(keep func(fleet.Request) bool) (n, bytes int) {
	for _, r := range s.reqs {
		if keep(r) {
			n++
			bytes += r.Bytes
		}
	}
	return n, bytes
}

// watchesAt is the number of watches open at t.
func (s side) watchesAt(t time.Time) int {
	n := 0
	for _, r := range s.all {
		if r.Verb == "watch" && r.Received.Before(t) && (r.Completed.IsZero() || r.Completed.After(t)) {
			n++
		}
	}
	return n
}

// p99 is the 99th percentile latency of the writes, "-" without any.
func (s side) p99Writes() string {
	var ls []time.Duration
	for _, r := range s.reqs {
		if r.IsWrite() && !r.Completed.IsZero() {
			ls = append(ls, r.Latency())
		}
	}
	if len(ls) == 0 {
		return "-"
	}
	slices.Sort(ls)
	return strconv.FormatFloat(float64(ls[(len(ls)*99)/100].Microseconds())/1000, 'f', 1, 64)
}

// burst is how a side came back after w.event.
type burst struct {
	peakRate    int     // most requests received in one second
	peakWriters float64 // largest share of the nodes writing in one second
	resynced    int     // nodes whose agent listed or watched its pods again
	resyncIn    time.Duration
	current     int // nodes with a successful write of their node status or Lease
	currentIn   time.Duration
}

func (s side) burst(from time.Time) burst {
	var b burst
	perSec := map[int64]int{}
	writers := map[int64]map[string]bool{}
	resync, current := map[string]time.Duration{}, map[string]time.Duration{}
	for _, r := range s.reqs {
		if r.Received.Before(from) {
			continue
		}
		sec := r.Received.Unix()
		perSec[sec]++
		if r.IsWrite() {
			if writers[sec] == nil {
				writers[sec] = map[string]bool{}
			}
			writers[sec][r.Node] = true
		}
		ok := r.Code >= 200 && r.Code < 300
		at := r.Received.Sub(from)
		if ok && r.Resource == "pods" && (r.Verb == "list" || r.Verb == "watch") {
			if _, seen := resync[r.Node]; !seen {
				resync[r.Node] = at
			}
		}
		if ok && r.IsWrite() && (r.Resource == "nodes" || r.Resource == "leases") {
			if _, seen := current[r.Node]; !seen {
				current[r.Node] = at
			}
		}
	}
	for _, n := range perSec {
		b.peakRate = max(b.peakRate, n)
	}
	for _, w := range writers {
		b.peakWriters = max(b.peakWriters, float64(len(w))/float64(s.nodes))
	}
	b.resynced, b.current = len(resync), len(current)
	for _, d := range resync {
		b.resyncIn = max(b.resyncIn, d)
	}
	for _, d := range current {
		b.currentIn = max(b.currentIn, d)
	}
	return b
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func writeReport(w io.Writer, cfg config, b *bench, reqs []fleet.Request, start agentMemory) {
	n := cfg.nodes
	fmt.Fprintf(w, "%d nodes, %d–%d pods each (%d in all), evictd %s; %d agents RSS at start: mean %.1f MiB (RssAnon %.1f, RssFile %.1f), max %.1f MiB; %d requests in the audit log\n\n",
		n, cfg.podsMin, cfg.podsMax, podCount(b.f), strings.Join(cfg.evictdArgs, " "), start.n,
		float64(start.rssMean)/mib, float64(start.anonMean)/mib, float64(start.fileMean)/mib, float64(start.rssMax)/mib, len(reqs))

	fmt.Fprintln(w, "| scenario | window | evictd req/node/min | evictd writes/node/min | evictd Node writes/node/5 min | evictd Node GETs | evictd bytes written/node/min | evictd watches/node | evictd p99 write ms | kubelet req/node/min | kubelet bytes written/node/min | kubelet p99 write ms | kube-apiserver CPU (cores) | kube-apiserver peak RSS MiB | etcd CPU (cores) | agents CPU (cores, all) | agent RSS mean / max MiB |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, win := range b.windows {
		ev, kl := newSide(reqs, fleet.Evictd, win, n), newSide(reqs, fleet.Kubelet, win, n)
		writes, evBytes := ev.count(fleet.Request.IsWrite)
		nodeWrites, _ := ev.count(fleet.Request.IsNodeWrite)
		gets, _ := ev.count(func(r fleet.Request) bool { return r.Resource == "nodes" && r.Verb == "get" })
		_, klBytes := kl.count(fleet.Request.IsWrite)
		secs := win.usage.wall.Seconds()
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %.1f / %.1f |\n",
			win.name, win.to.Sub(win.from).Round(time.Second), f2(ev.perNodeMin(len(ev.reqs))), f2(ev.perNodeMin(writes)),
			f2(ev.perNodeMin(nodeWrites)*5), gets, whole(ev.perNodeMin(evBytes)), f2(float64(ev.watchesAt(win.to))/float64(n)), ev.p99Writes(),
			f2(kl.perNodeMin(len(kl.reqs))), whole(kl.perNodeMin(klBytes)), kl.p99Writes(),
			f2(win.usage.cpu["kube-apiserver"].Seconds()/secs), float64(win.usage.peak["kube-apiserver"])/mib,
			f2(win.usage.cpu["etcd"].Seconds()/secs), f2(win.usage.cpu["agents"].Seconds()/secs),
			float64(win.usage.agent.rssMean)/mib, float64(win.usage.agent.rssPeak)/mib)
	}
	fmt.Fprintln(w)

	for _, win := range b.windows {
		writeKinds(w, reqs, win, n)
	}
	for _, win := range b.windows {
		if win.event.IsZero() {
			continue
		}
		fmt.Fprintf(w, "After %s (%s, watched %s):\n\n", win.name, win.eventWhat, win.to.Sub(win.event).Round(time.Second))
		fmt.Fprintln(w, "| client | peak requests in 1 s | peak share of nodes writing in 1 s | every node resynced (pods listed or watched) | every node current (its status or Lease written) |")
		fmt.Fprintln(w, "|---|---:|---:|---|---|")
		for _, who := range []fleet.Who{fleet.Evictd, fleet.Kubelet} {
			bu := newSide(reqs, who, win, n).burst(win.event)
			resync := allIn(bu.resynced, n, bu.resyncIn)
			if who == fleet.Kubelet {
				resync = "- (no watches emulated)"
			}
			fmt.Fprintf(w, "| %s | %d | %.0f%% | %s | %s |\n", who, bu.peakRate, 100*bu.peakWriters, resync, allIn(bu.current, n, bu.currentIn))
		}
		fmt.Fprintln(w)
	}
	writeBudgets(w, b, reqs, n)
	writeCapacity(w, b, n)
}

func whole(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func allIn(got, n int, d time.Duration) string {
	if got < n {
		return fmt.Sprintf("not all: %d of %d", got, n)
	}
	return d.Round(100 * time.Millisecond).String()
}

func podCount(f *fleet.Fleet) int {
	total := 0
	for _, n := range f.Nodes {
		total += n.PodCount()
	}
	return total
}

// writeKinds is the table of one window's requests per node per minute by
// verb and resource, the agents' beside the kubelets'.
func writeKinds(w io.Writer, reqs []fleet.Request, win *window, n int) {
	ev, kl := newSide(reqs, fleet.Evictd, win, n), newSide(reqs, fleet.Kubelet, win, n)
	ek, kk := ev.byKey(), kl.byKey()
	keys := map[string]bool{}
	for k := range ek {
		keys[k] = true
	}
	for k := range kk {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	cw, _ := ev.count(func(r fleet.Request) bool { return r.ClusterWide })
	fmt.Fprintf(w, "%s, %s: requests per node per minute (evictd cluster-wide lists/watches: %d; pods finished by the kubelets: %d)\n\n",
		win.name, win.to.Sub(win.from).Round(time.Second), cw, len(win.finished))
	fmt.Fprintln(w, "| verb resource | evictd | kubelet (emulated) |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, k := range sorted {
		fmt.Fprintf(w, "| %s | %s | %s |\n", k, f2(ev.perNodeMin(ek[k])), f2(kl.perNodeMin(kk[k])))
	}
	fmt.Fprintln(w)
}

func writeBudgets(w io.Writer, b *bench, reqs []fleet.Request, n int) {
	fmt.Fprintln(w, "Budgets:")
	var checks []fleet.Check
	end := time.Now()
	for _, win := range b.windows {
		switch win.name {
		case "idle":
			checks = append(checks, fleet.CheckIdle(reqs, n, win.from, win.to, false)...)
		case "pressure":
			checks = append(checks, pressureCheck(reqs, win, n))
		case "outage":
			bu := newSide(reqs, fleet.Evictd, win, n).burst(win.event)
			checks = append(checks, fleet.Check{
				Name: fmt.Sprintf("outage: no second with more than %.0f%% of the agents writing", 100*fleet.BurstWritersShare),
				Pass: bu.peakWriters <= fleet.BurstWritersShare,
				Got:  fmt.Sprintf("at most %.0f%% in one second", 100*bu.peakWriters),
			})
		}
		if !win.to.Before(end) {
			end = win.to
		}
	}
	checks = append(checks, fleet.CheckNoClusterWide(fleet.Select(reqs, fleet.Evictd, b.f.Started, end.Add(time.Minute))))
	for _, c := range checks {
		fmt.Fprintf(w, "- %s\n", c)
	}
	fmt.Fprintln(w)
}

// pressureCheck compares the Node writes of the pressured nodes' agents
// with the others' in the same window: the difference is what an episode
// cost.
func pressureCheck(reqs []fleet.Request, win *window, n int) fleet.Check {
	pressured := map[string]bool{}
	for _, node := range win.pressured {
		pressured[node.Name] = true
	}
	var pw, ow, pOther, oOther int
	for _, r := range fleet.Select(reqs, fleet.Evictd, win.from, win.to) {
		switch {
		case pressured[r.Node] && r.IsNodeWrite():
			pw++
		case pressured[r.Node]:
			pOther++
		case r.IsNodeWrite():
			ow++
		default:
			oOther++
		}
	}
	np, no := float64(len(win.pressured)), float64(max(n-len(win.pressured), 1))
	cost := float64(pw)/np - float64(ow)/no
	evictions := 0
	for _, fin := range win.finished {
		if pressured[fin.Node] {
			evictions++
		}
	}
	return fleet.Check{
		Name: fmt.Sprintf("pressure: an episode costs at most %g Node writes beyond idle", fleet.PressureNodeWrites),
		Pass: cost <= fleet.PressureNodeWrites && len(win.relieved) == len(win.pressured),
		Got: fmt.Sprintf("%.1f (%.1f Node writes per pressured node, %.1f per other node); other requests %.1f per pressured node, %.1f per other; %d of %d nodes evicted and relieved, %d pods evicted from them",
			cost, float64(pw)/np, float64(ow)/no, float64(pOther)/np, float64(oOther)/no, len(win.relieved), len(win.pressured), evictions),
	}
}

// writeCapacity extrapolates, linearly from the idle window, how many
// agents this machine holds.
func writeCapacity(w io.Writer, b *bench, n int) {
	var idle *window
	for _, win := range b.windows {
		if win.name == "idle" {
			idle = win
		}
	}
	if idle == nil || idle.usage.agent.n == 0 {
		return
	}
	u := idle.usage
	secs := u.wall.Seconds()
	memTotal := meminfoTotal()
	perAgentCPU := u.cpu["agents"].Seconds() / secs / float64(n)
	perNodeAPI := (u.cpu["kube-apiserver"].Seconds() + u.cpu["etcd"].Seconds()) / secs / float64(n)
	control := u.peak["kube-apiserver"] + u.peak["etcd"] + u.peak["kube-controller-manager"]
	// File-backed pages of the one binary are shared: counted once.
	perAgentMem := u.agent.anonMean
	fmt.Fprintf(w, "Capacity of this machine (%d CPUs, %.1f GiB), extrapolated linearly from the idle window:\n\n", runtime.NumCPU(), float64(memTotal)/(1<<30))
	fmt.Fprintf(w, "- per agent: RssAnon %.1f MiB (VmRSS %.1f MiB, of which file-backed %.1f MiB, shared by all agents), CPU %.3f%% of a core\n",
		float64(u.agent.anonMean)/mib, float64(u.agent.rssMean)/mib, float64(u.agent.fileMean)/mib, 100*perAgentCPU)
	fmt.Fprintf(w, "- kube-apiserver + etcd per node (agent and kubelet, and the control plane's own fixed cost spread over the nodes): %.3f%% of a core; control plane RSS %.0f MiB at %d nodes\n", 100*perNodeAPI, float64(control)/mib, n)
	if perAgentMem > 0 {
		fmt.Fprintf(w, "- memory bound: about %d agents (MemTotal − the control plane − 2 GiB, over RssAnon per agent)\n", (memTotal-control-2<<30)/perAgentMem)
	}
	if perAgentCPU+perNodeAPI > 0 {
		fmt.Fprintf(w, "- CPU bound: about %.0f nodes at idle (%d CPUs over the agent's and the control plane's share per node)\n", float64(runtime.NumCPU())/(perAgentCPU+perNodeAPI), runtime.NumCPU())
	}
	fmt.Fprintln(w)
}

func meminfoTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
