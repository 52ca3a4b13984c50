package wakeup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
	"github.com/evictd/evictd/thresholds"
)

// MemoryConfig says what Memory watches and how.
type MemoryConfig struct {
	// Thresholds are the thresholds in force; Memory watches those on
	// memory.available (the root cgroup) and allocatableMemory.available
	// (the kubepods cgroup).
	Thresholds []thresholds.Threshold
	// RootDir is the root memory cgroup's directory: the memory
	// controller's mount on cgroup v1 (/sys/fs/cgroup/memory), the cgroup2
	// mount on v2.
	RootDir string
	// KubepodsDir is the kubepods cgroup's directory in the same hierarchy.
	KubepodsDir string
	// V2 says the directories are cgroup v2.
	V2 bool
	// KernelMemcg enables the cgroup v1 memcg threshold notifiers
	// (--kernel-memcg-notification); ignored on v2, which has none.
	KernelMemcg bool
	// PSIFile is the machine's memory pressure file (/proc/pressure/memory);
	// "" or a missing file sets no machine-wide trigger.
	PSIFile string
	// PSI is the trigger set on PSIFile and, on v2, on kubepods'
	// memory.pressure. Default DefaultPSISpec.
	PSI PSISpec
	// FastPollInterval is the fast poll's period; 0 disables it.
	FastPollInterval time.Duration
	// FastPollMargin: the fast poll runs while a memory signal's available
	// amount is within this much (a quantity, or a fraction of the signal's
	// capacity) above one of its thresholds.
	FastPollMargin thresholds.Value
	Clock          clock.Clock
	Log            *slog.Logger
	// Counter counts wake-ups by source kind; may be nil.
	Counter Counter
	// Reads, when set, is given every reading of the fast poll, from the
	// poll's goroutine (the flight recorder keeps them); it must not
	// block.
	Reads func(signals.Observation)
}

// Memory runs every memory wake-up source the machine offers for a set of
// thresholds, and re-arms them from each pass's observations (Update).
type Memory struct {
	cfg   MemoryConfig
	group *Group
	fast  *FastPoll

	// always keeps the fast poll active whatever the headroom: a watched
	// threshold has no kernel notification to say that memory is nearing
	// it (cgroup v2, or memcg notifications off or unavailable), so the
	// poll, slow while memory is far and steady, is what sees a jump
	// toward it between two passes.
	always bool

	mu      sync.Mutex
	watches []*watch
	lastErr string
}

// watch is one memory threshold on the cgroup whose usage backs its signal.
type watch struct {
	name  string
	th    thresholds.Threshold
	cg    host.MemoryCgroup
	memcg *MemcgThreshold // nil without memcg notifications
	// margin, armed at the fast poll's margin above the threshold, wakes a
	// pass as memory comes near it, whose Update turns the fast poll on:
	// without it the poll would start only at a pass that happens to see
	// memory near, and growth from an idle node to the threshold between
	// two passes would go unread (time to exhaustion needs those reads).
	// nil without memcg notifications or the fast poll.
	margin *MemcgThreshold

	// From the last Update; read by the fast poll.
	known    bool
	capacity int64
	met      bool
	// pace is the recent readings, the fast poll's and the passes', the
	// poll paces itself by; handed is when the poll last handed one on
	// (MemoryConfig.Reads, ReadsEvery).
	pace   pace
	handed time.Time
}

// NewMemory sets up the sources; Run starts them.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if cfg.Log == nil || cfg.Clock == nil {
		return nil, errors.New("notify: a logger and a clock are required")
	}
	if cfg.PSI == (PSISpec{}) {
		cfg.PSI = DefaultPSISpec
	}
	m := &Memory{cfg: cfg, group: NewGroup(cfg.Log, cfg.Counter)}
	for _, th := range cfg.Thresholds {
		w := &watch{th: th, name: fmt.Sprintf("%s %s", th.Signal, th.Kind()), cg: host.MemoryCgroup{V2: cfg.V2}}
		switch th.Signal {
		case signals.MemoryAvailable:
			w.cg.Dir, w.cg.Root = cfg.RootDir, true
		case signals.AllocatableMemoryAvailable:
			w.cg.Dir = cfg.KubepodsDir
		default:
			continue
		}
		if w.cg.Dir == "" {
			continue
		}
		m.watches = append(m.watches, w)
	}

	if cfg.KernelMemcg && !cfg.V2 {
		for _, w := range m.watches {
			// kubepods may not exist yet: the notifier is armed by
			// the first Update that finds it.
			if w.cg.Root {
				if err := memcgAvailable(w.cg.Dir); err != nil {
					cfg.Log.Info("no memcg threshold notifications on the root cgroup", "err", err)
					continue
				}
			}
			w.memcg = NewMemcgThreshold(w.cg.Dir)
			m.group.Add("memcg "+w.name+" on "+w.cg.Dir, KindMemcg, w.memcg)
			if cfg.FastPollInterval > 0 {
				w.margin = NewMemcgThreshold(w.cg.Dir)
				m.group.Add("memcg "+w.name+" fast-poll margin on "+w.cg.Dir, KindMemcg, w.margin)
			}
		}
	}
	if cfg.PSIFile != "" {
		if err := m.addPSI(cfg.PSIFile); err != nil {
			return nil, err
		}
	}
	if cfg.V2 && cfg.KubepodsDir != "" {
		if err := m.addPSI(filepath.Join(cfg.KubepodsDir, "memory.pressure")); err != nil {
			return nil, err
		}
		ev := NewMemoryEvents(cfg.KubepodsDir)
		if _, err := os.Stat(ev.Path()); err == nil {
			m.group.Add("memory.events of "+cfg.KubepodsDir, KindMemoryEvents, ev)
		} else {
			cfg.Log.Info("no memory.events wake-ups", "err", err)
		}
	}
	if cfg.FastPollInterval > 0 && len(m.watches) > 0 {
		fp, err := NewFastPoll(cfg.FastPollInterval, cfg.Clock, m.check)
		if err != nil {
			return nil, err
		}
		m.fast = fp
		m.group.Add(fmt.Sprintf("fast poll every %s near a memory threshold", cfg.FastPollInterval), KindFastPoll, fp)
		for _, w := range m.watches {
			if w.memcg == nil {
				m.always = true
				cfg.Log.Info("the fast poll runs at all times: no kernel notification before a memory threshold",
					"threshold", w.name, "cgroup", w.cg.Dir, "interval", cfg.FastPollInterval)
				break
			}
		}
	}
	return m, nil
}

func (m *Memory) addPSI(path string) error {
	if _, err := os.Stat(path); err != nil {
		m.cfg.Log.Info("no PSI wake-ups", "err", err)
		return nil
	}
	p, err := NewPSITrigger(path, m.cfg.PSI)
	if err != nil {
		return err
	}
	m.group.Add(fmt.Sprintf("PSI trigger %q on %s", m.cfg.PSI.String(), path), KindPSI, p)
	return nil
}

// Run runs the sources until ctx is done, calling wake at each event.
func (m *Memory) Run(ctx context.Context, wake func()) error {
	defer func() {
		for _, w := range m.watches {
			if w.memcg != nil {
				_ = w.memcg.Close()
			}
			if w.margin != nil {
				_ = w.margin.Close()
			}
		}
	}()
	return m.group.Run(ctx, wake)
}

// passReading is a pass's reading of a watched threshold (Update).
type passReading struct {
	w *watch
	reading
}

// Update re-arms the memcg notifiers from a pass's observations, at each
// threshold's usage level (UsageLevel, with the cgroup's inactive page
// cache read now) and at the fast poll's margin above it, and turns the
// fast poll on while an observed memory signal's headroom above a
// threshold (thresholds.Headroom) is within the margin, or at all times
// when a threshold has no kernel notification (Memory.always). The pass's
// observations are the poll's last readings, which its next check paces
// itself by. A signal not observed keeps its last arming. Errors are
// logged when they change, not at every pass.
func (m *Memory) Update(obs signals.Observations) {
	m.mu.Lock()
	defer m.mu.Unlock()
	near := false
	var errs []error
	var readings []passReading
	inactive := map[string]int64{}
	for _, w := range m.watches {
		o, ok := obs[w.th.Signal]
		if !ok {
			w.known = false
			continue
		}
		headroom := thresholds.Headroom(w.th, o)
		w.known, w.capacity, w.met = true, o.Capacity, headroom < 0
		readings = append(readings, passReading{w, reading{headroom: headroom, at: o.Time}})
		if headroom <= thresholds.Quantity(m.cfg.FastPollMargin, o.Capacity) {
			near = true
		}
		if w.memcg == nil {
			continue
		}
		in, ok := inactive[w.cg.Dir]
		if !ok {
			var err error
			if in, err = w.cg.InactiveFile(); err != nil {
				errs = append(errs, fmt.Errorf("memcg %s: %w", w.name, err))
				continue
			}
			inactive[w.cg.Dir] = in
		}
		q := thresholds.Quantity(w.th.Value, o.Capacity)
		if err := w.memcg.Set(UsageLevel(o.Capacity, q, in)); err != nil {
			errs = append(errs, fmt.Errorf("memcg %s: %w", w.name, err))
		}
		if w.margin != nil {
			// At or below no usage (a margin beyond the capacity) Set
			// disarms it: the poll then runs from every pass anyway.
			mq := thresholds.Quantity(m.cfg.FastPollMargin, o.Capacity)
			if err := w.margin.Set(UsageLevel(o.Capacity, q+mq, in)); err != nil {
				errs = append(errs, fmt.Errorf("memcg %s fast-poll margin: %w", w.name, err))
			}
		}
	}
	// The pass's readings pace the fast poll as its own would: the first
	// check after the poll is made active then already sees how fast
	// memory grows (PollWithin). Made active, the poll paces itself
	// afresh from this pass: memory has just come near a threshold, and
	// how it grew far from it, up to a housekeeping interval ago, says
	// little of how it grows now. A check may have read since the pass
	// did; pace ignores the older reading.
	starting := m.fast != nil && (near || m.always) && !m.fast.active.Load()
	for _, r := range readings {
		if starting {
			r.w.pace = pace{}
		}
		r.w.pace.add(r.headroom, r.at)
	}
	if m.fast != nil {
		m.fast.SetActive(near || m.always)
	}
	err := errors.Join(errs...)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == m.lastErr:
	case msg == "":
		m.cfg.Log.Info("memory threshold notifiers armed again")
	default:
		m.cfg.Log.Warn("cannot arm some memory threshold notifiers; passes still run every housekeeping interval", "err", err)
	}
	m.lastErr = msg
}

// check is the fast poll's: it reads each watched cgroup's working set
// (host.MemoryCgroup, as the pass's signal sources read it), and says to wake
// when a threshold's met state differs from what the last pass (or check)
// saw: newly met, or newly relieved. Available is the capacity of the last
// pass minus that working set, clamped at 0 as the sources clamp it. It
// also says when to look next (pace): the soonest of the watches'. Its
// readings are handed on (MemoryConfig.Reads) at most every ReadsEvery per
// threshold, and at once when they change its met state.
func (m *Memory) check() (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wake := false
	var next time.Duration
	for _, w := range m.watches {
		if !w.known {
			continue
		}
		ws, err := w.cg.WorkingSet()
		if err != nil {
			continue // the next pass reports it
		}
		now := m.cfg.Clock.Now()
		o := signals.Observation{Signal: w.th.Signal, Available: max(w.capacity-ws, 0), Capacity: w.capacity, Time: now}
		h := thresholds.Headroom(w.th, o)
		flipped := (h < 0) != w.met
		if flipped {
			w.met, wake = h < 0, true
		}
		if m.cfg.Reads != nil && (flipped || w.handed.IsZero() || now.Sub(w.handed) >= ReadsEvery) {
			m.cfg.Reads(o)
			w.handed = now
		}
		if d := w.pace.add(h, now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return wake, next
}
