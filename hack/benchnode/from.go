package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fromRuns writes the tables and the charts again from the run lines of
// earlier outputs (--from): a grid stopped part of the way, or run in
// parts, still gives its tables, for the cells of --sides, --rates and
// --threshold-mib.
func fromRuns(cfg config, paths []string) error {
	var results []result
	for _, path := range paths {
		rs, scale, err := readRuns(path)
		if err != nil {
			return err
		}
		results = append(results, rs...)
		if cfg.scale == 0 {
			cfg.scale = scale // a guest's: its ramps were of the scaled rates
		}
	}
	var out io.Writer = os.Stdout
	if cfg.out != "" {
		for _, path := range paths {
			if same(path, cfg.out) {
				return fmt.Errorf("--out %s is one of --from's files: it would be overwritten", cfg.out)
			}
		}
		f, err := os.Create(cfg.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	fmt.Fprintf(out, "%d runs read from %s\n\n", len(results), strings.Join(paths, ", "))
	writeTable(out, cfg, sides(cfg.scaled(cfg.thresholdMiB), cfg.transition), results)
	if cfg.out == "" {
		return nil
	}
	for _, name := range cfg.sides {
		path := cfg.out + "." + name + ".svg"
		if err := os.WriteFile(path, gridSVG(cfg, name, results), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "chart of side %s: %s\n", name, path)
	}
	return nil
}

func same(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// readRuns reads the run lines of a benchmark's output at path, and the
// guest's slowdown when the output is a guest's (0 otherwise).
func readRuns(path string) (results []result, scale float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, "slowdown s = "); ok && scale == 0 {
			v, _, _ := strings.Cut(rest, ";")
			if scale, err = strconv.ParseFloat(v, 64); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: the guest's slowdown %q: %w", path, n, v, err)
			}
		}
		_, rest, ok := strings.Cut(line, " run side=")
		if !ok {
			continue
		}
		r, err := parseRun("side=" + rest)
		if err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return results, scale, nil
}

// parseRun reads a run's line (result.line, from "side=") back. Its
// times are relative, in whole milliseconds: they are placed on a clock
// of their own from the crossing, or, when the harness never saw it, from
// the deciding pass's start. The pass's stages are not in the line.
func parseRun(line string) (result, error) {
	kv := map[string]string{}
	for f := range strings.FieldsSeq(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return result{}, fmt.Errorf("field %q is not key=value", f)
		}
		kv[k] = v
	}
	var r result
	var err error
	// A run line of an older harness lacks some fields: only the
	// cell's are required.
	num := func(key, unit string) int64 {
		if err != nil {
			return 0
		}
		v, ok := kv[key]
		if !ok {
			if key == "threshold" || key == "rate" {
				err = fmt.Errorf("no %s", key)
			}
			return 0
		}
		n, perr := strconv.ParseInt(strings.TrimSuffix(v, unit), 10, 64)
		if perr != nil {
			err = fmt.Errorf("%s=%q: %w", key, v, perr)
		}
		return n
	}
	// span is a relative time in ms; ok is false for "-".
	span := func(key string) (time.Duration, bool) {
		if err != nil {
			return 0, false
		}
		v := kv[key]
		if v == "" || v == "-ms" || v == "-" {
			return 0, false
		}
		f, perr := strconv.ParseFloat(strings.TrimSuffix(v, "ms"), 64)
		if perr != nil {
			err = fmt.Errorf("%s=%q: %w", key, v, perr)
			return 0, false
		}
		return time.Duration(f * float64(time.Millisecond)), true
	}
	boolean := func(key string) bool {
		if err != nil {
			return false
		}
		if _, ok := kv[key]; !ok {
			return false
		}
		b, perr := strconv.ParseBool(kv[key])
		if perr != nil {
			err = fmt.Errorf("%s=%q: %w", key, kv[key], perr)
		}
		return b
	}
	r.side = kv["side"]
	if r.side == "" {
		return r, fmt.Errorf("no side")
	}
	r.threshold = int(num("threshold", "MiB"))
	r.rate = int(num("rate", ""))
	r.rep = int(num("rep", ""))
	r.baseMiB = num("base", "MiB")
	r.evicted = boolean("evicted")
	r.predicted = boolean("predicted")
	r.oomKills = num("oom_kill", "")
	r.treeOOMKills = num("kubepods_oom_kill", "")
	r.reason = kv["reason"]
	r.peakWS = num("peak_ws", "MiB") << 20
	r.peakUsage = num("peak_usage", "MiB") << 20
	r.samples = int(num("samples", ""))
	if ramp, ok := kv["ramp"]; ok {
		r.rampMiBPerSec, _ = strconv.ParseFloat(strings.TrimSuffix(ramp, "MiB/s"), 64)
	}

	at := func(from time.Time, d time.Duration, ok bool) time.Time {
		if !ok || from.IsZero() {
			return time.Time{}
		}
		return from.Add(d)
	}
	origin := time.Unix(0, 0).UTC()
	toPass, crossedToPass := span("cross->pass")
	toRelief, okRelief := span("cross->relief")
	toIssued, okIssued := span("cross->issued")
	toSeen, okSeen := span("cross->seen")
	toTerm, okTerm := span("cross->terminated")
	toReceived, okReceived := span("cross->received")
	passToDecided, okDecided := span("pass->decided")
	decidedToTerm, okDecidedTerm := span("decided->terminated")
	receivedToLogged, okLogged := span("received->logged")
	if err != nil {
		return r, err
	}
	if okRelief || okIssued || okSeen || okTerm || okReceived || crossedToPass {
		r.crossed = origin
		r.relief = at(origin, toRelief, okRelief)
		r.issued = at(origin, toIssued, okIssued)
		r.seen = at(origin, toSeen, okSeen)
		r.terminated = at(origin, toTerm, okTerm)
		r.received = at(origin, toReceived, okReceived)
		r.passStart = at(origin, toPass, crossedToPass)
	} else if okDecided {
		r.passStart = origin // the harness never saw the crossing
	}
	r.decided = at(r.passStart, passToDecided, okDecided)
	if r.terminated.IsZero() {
		r.terminated = at(r.decided, decidedToTerm, okDecidedTerm)
	}
	if r.received.IsZero() {
		r.received = at(r.terminated, -receivedToLogged, okLogged)
	}
	if path := kv["signal_path"]; path != "" && path != "-" {
		d, ok := span("decided->signal")
		if err != nil {
			return r, err
		}
		if ok {
			r.signalPath, r.toSignal = path, d
		}
	}
	return r, nil
}
