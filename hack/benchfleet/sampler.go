package main

import (
	"context"
	"sync"
	"time"

	"github.com/evictd/evictd/internal/testing/fleet"
)

// sampler reads /proc of the control plane's components and of every
// agent at an interval: CPU time summed over each one's PIDs (a restarted
// component counts from its new start), and memory.
type sampler struct {
	f     *fleet.Fleet
	every time.Duration

	mu   sync.Mutex
	last map[int]time.Duration // CPU at the last sample, by PID
	cpu  map[string]time.Duration
	// Since the last reset: the highest VmRSS by component, and the agents'
	// memory at the last sample.
	peak   map[string]int64
	agent  agentMemory
	marked struct {
		at  time.Time
		cpu map[string]time.Duration
	}
}

// agentMemory is the agents' memory at one sample.
type agentMemory struct {
	n                             int
	rssMean, rssMax, anonMean     int64
	fileMean, rssPeak, anonMaxAll int64
}

// usage is what the sampler saw over a window.
type usage struct {
	wall  time.Duration
	cpu   map[string]time.Duration // component → CPU time in the window; "agents" is all agents
	peak  map[string]int64         // component → highest VmRSS
	agent agentMemory
}

func newSampler(f *fleet.Fleet, every time.Duration) *sampler {
	s := &sampler{f: f, every: every, last: map[int]time.Duration{}, cpu: map[string]time.Duration{}, peak: map[string]int64{}}
	s.reset()
	return s
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	comps := s.f.Cluster.PIDs()
	agents := s.f.AgentPIDs()
	s.mu.Lock()
	defer s.mu.Unlock()
	add := func(name string, pid int) (fleet.ProcSample, bool) {
		p, err := fleet.ReadProc(pid)
		if err != nil {
			return p, false
		}
		s.cpu[name] += p.CPU - s.last[pid]
		s.last[pid] = p.CPU
		s.peak[name] = max(s.peak[name], p.RSS)
		return p, true
	}
	for name, pid := range comps {
		add(name, pid)
	}
	var m agentMemory
	var rss, anon, file int64
	for _, pid := range agents {
		p, ok := add("agents", pid)
		if !ok {
			continue
		}
		m.n++
		rss += p.RSS
		anon += p.RSSAnon
		file += p.RSSFile
		m.rssMax = max(m.rssMax, p.RSS)
		s.agent.rssPeak = max(s.agent.rssPeak, p.RSS)
		s.agent.anonMaxAll = max(s.agent.anonMaxAll, p.RSSAnon)
	}
	if m.n > 0 {
		m.rssMean, m.anonMean, m.fileMean = rss/int64(m.n), anon/int64(m.n), file/int64(m.n)
		m.rssPeak, m.anonMaxAll = s.agent.rssPeak, s.agent.anonMaxAll
		s.agent = m
	}
}

// reset starts a window: CPU is counted from now, peaks start again.
func (s *sampler) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked.at = time.Now()
	s.marked.cpu = map[string]time.Duration{}
	for k, v := range s.cpu {
		s.marked.cpu[k] = v
	}
	s.peak = map[string]int64{}
	s.agent = agentMemory{}
}

// since returns the usage from the last reset to now.
func (s *sampler) since() usage {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := usage{wall: time.Since(s.marked.at), cpu: map[string]time.Duration{}, peak: map[string]int64{}, agent: s.agent}
	for k, v := range s.cpu {
		u.cpu[k] = v - s.marked.cpu[k]
	}
	for k, v := range s.peak {
		u.peak[k] = v
	}
	return u
}

// agents returns the agents' memory at the last sample.
func (s *sampler) agents() agentMemory {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent
}
