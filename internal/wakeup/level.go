package wakeup

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UsageLevel is the memory usage, in bytes, of a cgroup with capacity
// bytes at which a threshold "available < quantity" starts to be met, when
// the cgroup holds inactiveFile bytes of inactive page cache. It is the
// kubelet's memcgThreshold (memory_threshold_notifier.go):
//
//	available   = capacity − working set
//	working set = usage − inactive_file
//	available < quantity  ⇔  usage > capacity − quantity + inactive_file
//
// The kernel compares the cgroup's usage (memory.usage_in_bytes), which
// counts inactive page cache, with the level, so inactive_file is added:
// without it the notifier would fire only once the page cache was gone.
// inactive_file is read when the level is set and drifts until the next
// set: page cache read in since then makes the notification early (a pass
// that finds nothing), cache reclaimed since then makes it late. Re-arming
// after every pass bounds the drift to one pass; the fast poll reads the
// working set itself and has no drift.
func UsageLevel(capacity, quantity, inactiveFile int64) int64 {
	return capacity - quantity + inactiveFile
}

// parseEvents parses a cgroup v2 memory.events (or any flat keyed file of
// counters: "low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\n").
func parseEvents(name string, data []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for line := range bytes.Lines(data) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		k, v, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("%s: invalid line %q", name, s)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: invalid value %q", name, k, v)
		}
		out[k] = n
	}
	return out, nil
}

// eventsChanged reports whether any counter of a memory.events file moved:
// a high, max, oom or oom_kill event, each a sign of memory pressure in the
// cgroup. An unreadable file counts as changed, so a pass looks.
func eventsChanged(name string, prev, cur []byte) bool {
	a, errA := parseEvents(name, prev)
	b, errB := parseEvents(name, cur)
	if errA != nil || errB != nil || len(a) != len(b) {
		return true
	}
	for k, v := range b {
		if a[k] != v {
			return true
		}
	}
	return false
}

// PSI trigger limits (kernel/sched/psi.c psi_trigger_create): the window is
// 500ms to 10s, the stall more than zero and no longer than the window.
const (
	minPSIWindow = 500 * time.Millisecond
	maxPSIWindow = 10 * time.Second
)

// PSISpec is a PSI trigger: wake when tasks stalled on memory for Stall in
// any Window ("some": at least one task; "full": all non-idle tasks).
type PSISpec struct {
	Full   bool
	Stall  time.Duration
	Window time.Duration
}

// DefaultPSISpec wakes when some task stalled on memory 150ms in 2s. The
// window is a multiple of 2s, the only windows the kernel accepts from a
// process without CAP_SYS_RESOURCE (which root in a container may lack).
var DefaultPSISpec = PSISpec{Stall: 150 * time.Millisecond, Window: 2 * time.Second}

// Check returns an error naming the value the kernel would refuse.
func (s PSISpec) Check() error {
	if s.Window < minPSIWindow || s.Window > maxPSIWindow || s.Window%time.Microsecond != 0 {
		return fmt.Errorf("PSI trigger window %s: must be a whole number of microseconds from %s to %s", s.Window, minPSIWindow, maxPSIWindow)
	}
	if s.Stall <= 0 || s.Stall > s.Window || s.Stall%time.Microsecond != 0 {
		return fmt.Errorf("PSI trigger stall %s: must be a whole number of microseconds, more than 0 and at most the window %s", s.Stall, s.Window)
	}
	return nil
}

// String is the trigger as written to a pressure file:
// "some 150000 1000000" (microseconds).
func (s PSISpec) String() string {
	kind := "some"
	if s.Full {
		kind = "full"
	}
	return fmt.Sprintf("%s %d %d", kind, s.Stall.Microseconds(), s.Window.Microseconds())
}
