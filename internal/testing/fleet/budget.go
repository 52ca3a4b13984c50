package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The budgets of an agent's requests that the fleet checks.
const (
	// IdleNodeWritesPer5m is the most Node writes an idle agent makes per
	// node per 5 minutes, on average.
	IdleNodeWritesPer5m = 1.0
	// PressureNodeWrites is the most Node writes one pressure episode
	// (pressure, one eviction, relief) costs beyond idle.
	PressureNodeWrites = 4.0
	// BurstWritersShare is the largest share of the agents that may write
	// in any one second after an outage.
	BurstWritersShare = 0.10
)

// Check is one budget's verdict.
type Check struct {
	Name string
	Pass bool
	Got  string
}

func (c Check) String() string {
	v := "PASS"
	if !c.Pass {
		v = "FAIL"
	}
	return fmt.Sprintf("%s  %s: %s", v, c.Name, c.Got)
}

// Select returns the requests of who received in [from, to); any who when
// who is "".
func Select(reqs []Request, who Who, from, to time.Time) []Request {
	var out []Request
	for _, r := range reqs {
		if (who == "" || r.Who == who) && !r.Received.Before(from) && r.Received.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// withoutFirstNodeWrite drops each node's first Node write.
func withoutFirstNodeWrite(reqs []Request) []Request {
	seen := map[string]bool{}
	out := make([]Request, 0, len(reqs))
	for _, r := range reqs {
		if r.IsNodeWrite() && !seen[r.Node] {
			seen[r.Node] = true
			continue
		}
		out = append(out, r)
	}
	return out
}

// CheckIdle checks the idle budgets on the agents' requests (reqs, of any
// client) received in [from, to) on a fleet of nodes: no GET of a Node, and
// at most IdleNodeWritesPer5m Node writes per node per 5 minutes on
// average; with skipFirst, each agent's first Node write (its state at
// start) is not counted.
func CheckIdle(reqs []Request, nodes int, from, to time.Time, skipFirst bool) []Check {
	ev := Select(reqs, Evictd, from, to)
	if skipFirst {
		ev = withoutFirstNodeWrite(ev)
	}
	gets, writes := 0, 0
	for _, r := range ev {
		switch {
		case r.Resource == "nodes" && r.Verb == "get":
			gets++
		case r.IsNodeWrite():
			writes++
		}
	}
	per5m := float64(writes) / float64(nodes) / (to.Sub(from).Minutes() / 5)
	first := ""
	if skipFirst {
		first = ", each agent's first left out"
	}
	return []Check{
		{Name: "idle: no Node GET", Pass: gets == 0, Got: fmt.Sprintf("%d Node GETs by %d agents in %s", gets, nodes, to.Sub(from).Round(time.Second))},
		{
			Name: fmt.Sprintf("idle: at most %g Node write per node per 5 min", IdleNodeWritesPer5m),
			Pass: per5m <= IdleNodeWritesPer5m,
			Got:  fmt.Sprintf("%.2f (%d Node writes by %d agents in %s%s)", per5m, writes, nodes, to.Sub(from).Round(time.Second), first),
		},
	}
}

// CheckNoClusterWide checks that no agent listed or watched beyond its
// node.
func CheckNoClusterWide(reqs []Request) Check {
	kinds := map[string]int{}
	n := 0
	for _, r := range reqs {
		if r.Who == Evictd && r.ClusterWide {
			n++
			kinds[r.Key()]++
		}
	}
	got := "none"
	if n > 0 {
		var parts []string
		for k, c := range kinds {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, c))
		}
		slices.Sort(parts)
		got = strings.Join(parts, ", ")
	}
	return Check{Name: "no cluster-wide list or watch by evictd", Pass: n == 0, Got: got}
}
