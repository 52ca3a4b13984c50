package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// sample is one observation of evictd.
type sample struct {
	at         time.Time
	elapsed    float64 // seconds since the soak started
	rss        int64   // VmRSS, bytes
	anon, file int64   // RssAnon, RssFile
	hwm        int64   // VmHWM
	threads    int
	fds        int
	goroutines float64 // go_goroutines
	heapInuse  float64 // go_memstats_heap_inuse_bytes
	passes     float64 // evictd_passes_total, all triggers
	evictions  float64 // evictd_evictions_total: evictions issued, all signals
	seenPods   int     // pods in evictd's last pass (/status)
	replicas   int     // the churn ReplicaSet's size
	singles    int     // single pods created so far
	hogs       int     // hogs created so far
	hogEvicted int     // hogs evicted so far
	podsOOM    int64   // oom_kill of the node's kubepods cgroup since the start
	hostOOM    int64   // oom_kill of /proc/vmstat since the start (the whole machine)
	load1      string  // the machine's 1-minute load average
	kubelets   int     // kubelet processes on the machine (other nodes run beside this one)
}

var csvHeader = []string{"time", "elapsed_s", "vmrss_bytes", "rss_anon_bytes", "rss_file_bytes", "vmhwm_bytes", "threads", "fds",
	"goroutines", "heap_inuse_bytes", "passes", "evictions", "pods_seen", "replicas", "singles_created", "hogs", "hogs_evicted",
	"kubepods_oom_kills", "host_oom_kills", "load1", "kubelets_on_machine"}

func createCSV(dir string) (*os.File, error) {
	f, err := os.Create(filepath.Join(dir, "samples.csv"))
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintln(f, strings.Join(csvHeader, ",")); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (r sample) csv() string {
	return strings.Join([]string{
		r.at.UTC().Format(time.RFC3339), strconv.FormatFloat(r.elapsed, 'f', 1, 64),
		itoa(r.rss), itoa(r.anon), itoa(r.file), itoa(r.hwm), strconv.Itoa(r.threads), strconv.Itoa(r.fds),
		strconv.FormatFloat(r.goroutines, 'f', -1, 64), strconv.FormatFloat(r.heapInuse, 'f', -1, 64),
		strconv.FormatFloat(r.passes, 'f', -1, 64), strconv.FormatFloat(r.evictions, 'f', -1, 64),
		strconv.Itoa(r.seenPods), strconv.Itoa(r.replicas), strconv.Itoa(r.singles), strconv.Itoa(r.hogs), strconv.Itoa(r.hogEvicted),
		itoa(r.podsOOM), itoa(r.hostOOM), r.load1, strconv.Itoa(r.kubelets),
	}, ",")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// sampleLoop samples evictd every --interval until ctx ends. It returns an
// error when evictd died or runs under another PID (a restart).
func (s *soak) sampleLoop(ctx context.Context) error {
	defer s.csv.Close()
	tick := time.NewTicker(s.o.interval)
	defer tick.Stop()
	last := time.Now()
	for {
		r, err := s.sample(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.mu.Lock()
		s.samples = append(s.samples, r)
		s.mu.Unlock()
		if _, err := fmt.Fprintln(s.csv, r.csv()); err != nil {
			return err
		}
		if time.Since(last) >= 5*time.Minute || len(s.samples) == 1 {
			last = time.Now()
			say("soak: +%s  VmRSS %.1f MiB (anon %.1f)  goroutines %.0f  fds %d  threads %d  passes %.0f  evictions %.0f  hogs %d/%d evicted  pods seen %d",
				time.Duration(r.elapsed)*time.Second, mib(r.rss), mib(r.anon), r.goroutines, r.fds, r.threads, r.passes, r.evictions, r.hogEvicted, r.hogs, r.seenPods)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *soak) sample(ctx context.Context) (sample, error) {
	r := sample{at: time.Now()}
	r.elapsed = r.at.Sub(s.start).Seconds()
	if pid := s.n.EvictdPID(); pid != s.pid {
		if pid == 0 {
			return r, fmt.Errorf("evictd (pid %d) exited after %s", s.pid, time.Since(s.start).Round(time.Second))
		}
		return r, fmt.Errorf("evictd runs as pid %d, not %d: it was restarted", pid, s.pid)
	}
	st, err := procStatus(s.pid)
	if err != nil {
		return r, fmt.Errorf("evictd (pid %d): %w", s.pid, err)
	}
	r.rss, r.anon, r.file, r.hwm, r.threads = st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"], int(st["Threads"])
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid))
	if err != nil {
		return r, fmt.Errorf("evictd (pid %d) fds: %w", s.pid, err)
	}
	r.fds = len(ents)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := s.n.EvictdGet(sctx, "/metrics")
	if err != nil {
		return r, fmt.Errorf("evictd /metrics: %w", err)
	}
	gor, ok := metricValueBare(body, "go_goroutines")
	if !ok {
		return r, fmt.Errorf("evictd /metrics: no go_goroutines")
	}
	r.goroutines = gor
	r.heapInuse, _ = metricValueBare(body, "go_memstats_heap_inuse_bytes")
	r.passes = metricSum(body, "evictd_passes_total")
	r.evictions = metricSum(body, "evictd_evictions_total")
	if js, err := s.n.EvictdGet(sctx, "/status"); err == nil {
		var v struct {
			Pods int `json:"pods"`
		}
		if json.Unmarshal([]byte(js), &v) == nil {
			r.seenPods = v.Pods
		}
	}
	if v, err := cgroupOOMKills(s.n.PodsMemoryCgroup()); err == nil {
		r.podsOOM = v - s.oomBase
	}
	if v, err := hostOOMKills(); err == nil {
		r.hostOOM = v - s.hostBase
	}
	r.load1 = strings.Fields(loadAvg() + " ?")[0]
	r.kubelets = countKubelets()
	s.mu.Lock()
	r.replicas, r.singles, r.hogs, r.hogEvicted = s.replicas, s.singles, s.hogs, s.evicted
	s.mu.Unlock()
	return r, nil
}

// metricValueBare returns the value of an unlabelled sample.
func metricValueBare(body, name string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// procStatus returns evictd's VmRSS, RssAnon, RssFile and VmHWM from
// /proc/PID/status, in bytes, and Threads from /proc/PID/stat.
func procStatus(pid int) (map[string]int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return nil, err
	}
	stat, err := p.Stat()
	if err != nil {
		return nil, err
	}
	return map[string]int64{"VmRSS": int64(st.VmRSS), "RssAnon": int64(st.RssAnon), "RssFile": int64(st.RssFile),
		"VmHWM": int64(st.VmHWM), "Threads": int64(stat.NumThreads)}, nil
}

// cgroupOOMKills reads oom_kill from a cgroup v1 memory.oom_control.
func cgroupOOMKills(dir string) (int64, error) {
	return keyedValue(filepath.Join(dir, "memory.oom_control"), "oom_kill")
}

// hostOOMKills reads the machine's oom_kill count from /proc/vmstat.
func hostOOMKills() (int64, error) { return keyedValue("/proc/vmstat", "oom_kill") }

func keyedValue(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// countKubelets counts kubelet processes on the machine: other nodes
// running beside this one share its CPUs and memory.
func countKubelets() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == "kubelet" {
			n++
		}
	}
	return n
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
