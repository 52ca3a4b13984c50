package thresholds

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// Parsed is the outcome of Parse: the thresholds in force and what the
// operator should read about them at startup.
type Parsed struct {
	// Thresholds are sorted by SortByPriority: signals in signals.All order,
	// hard before soft. There is at most one hard and one soft threshold per
	// signal, so Key identifies each. containerfs.* entries the operator set
	// are still here; DeriveContainerFs replaces them once the layout is known.
	Thresholds []Threshold
	// Notes are sentences for the startup log: defaults dropped or merged,
	// settings that have no effect, evictd's deliberate differences.
	Notes []string
}

// SourceDefault is the Source of thresholds that come from the defaults.
const SourceDefault = "default"

// Fallback source names, used when a Settings.*Source is empty.
const (
	flagHard       = "--eviction-hard"
	flagSoft       = "--eviction-soft"
	flagGrace      = "--eviction-soft-grace-period"
	flagMinReclaim = "--eviction-minimum-reclaim"
	flagEnforce    = "--enforce-node-allocatable"
)

// defaultHard is the kubelet's Linux evictionHard default, in signal order.
var defaultHard = []struct {
	signal signals.Signal
	value  string
}{
	{signals.MemoryAvailable, "100Mi"},
	{signals.NodeFsAvailable, "10%"},
	{signals.NodeFsInodesFree, "5%"},
	{signals.ImageFsAvailable, "15%"},
	{signals.ImageFsInodesFree, "5%"},
}

// DefaultHard returns a fresh copy of the default hard thresholds (Linux),
// as a Settings.Hard map: memory.available<100Mi, nodefs.available<10%,
// nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%.
func DefaultHard() map[string]string {
	m := make(map[string]string, len(defaultHard))
	for _, d := range defaultHard {
		m[string(d.signal)] = d.value
	}
	return m
}

// Parse validates s and turns it into thresholds, exactly as the kubelet's
// ParseThresholdConfig does after its defaulting (reference §2.2–§2.4).
//
// Every error carries the kubelet's text verbatim after the name of the
// setting it is about: "<source>: <kubelet text>", where source is the
// Settings.*Source of the offending map or, when that is empty, the
// kubelet's flag name (--eviction-hard, --eviction-soft,
// --eviction-soft-grace-period, --eviction-minimum-reclaim); a quantity
// that does not parse is named before the text ("--eviction-hard:
// memory.available<lots: quantities must match ..."). Errors from
// resource.ParseQuantity, strconv.ParseFloat and time.ParseDuration are
// wrapped with %w, so errors.Is(err, resource.ErrFormatWrong) holds. The
// enforce-node-allocatable errors are the kubelet's configuration-validation
// texts, prefixed with Settings.EnforceNodeAllocatableSource when that names
// a file; the texts themselves name the flag. Entries are checked
// in the kubelet's order (hard, soft, grace periods, minimum reclaims, soft
// without grace), each map in sorted key order, so the error is always the
// same one.
func Parse(s Settings) (Parsed, error) {
	var p Parsed
	if err := validateEnforceNodeAllocatable(s.EnforceNodeAllocatable); err != nil {
		if src := s.EnforceNodeAllocatableSource; src != "" && src != flagEnforce {
			return Parsed{}, fmt.Errorf("%s: %w", src, err)
		}
		return Parsed{}, err
	}
	hardSrc := orDefault(s.HardSource, flagHard)
	softSrc := orDefault(s.SoftSource, flagSoft)
	graceSrc := orDefault(s.SoftGracePeriodSource, flagGrace)
	reclaimSrc := orDefault(s.MinimumReclaimSource, flagMinReclaim)

	hard, err := p.parseStatements(p.hardEntries(s, hardSrc))
	if err != nil {
		return Parsed{}, err
	}
	soft, err := p.parseStatements(entries(s.Soft, softSrc))
	if err != nil {
		return Parsed{}, err
	}
	grace, err := parseGracePeriods(s.SoftGracePeriod, graceSrc)
	if err != nil {
		return Parsed{}, err
	}
	reclaim, err := parseMinimumReclaims(s.MinimumReclaim, reclaimSrc)
	if err != nil {
		return Parsed{}, err
	}
	for i := range soft {
		t := &soft[i]
		period, ok := grace[t.Signal]
		if !ok {
			return Parsed{}, fmt.Errorf("%s: grace period must be specified for the soft eviction threshold %s", softSrc, t.Signal)
		}
		t.Soft, t.GracePeriod = true, period
		if period == 0 {
			p.note("%s: %s has a 0s grace period; evictd treats it as a hard threshold (evicts at once, with the hard-eviction pod grace period)", softSrc, t)
		}
	}
	for _, sig := range sortedSignals(grace) {
		if !hasSignal(soft, sig) {
			p.note("%s: the grace period for %s has no effect: there is no soft threshold for that signal", graceSrc, sig)
		}
	}

	ths := append(hard, soft...)
	for i := range ths {
		if v, ok := reclaim[ths[i].Signal]; ok {
			v = v.clone()
			ths[i].MinReclaim = &v
		}
	}
	for _, sig := range sortedSignals(reclaim) {
		if !hasSignal(ths, sig) {
			p.note("%s: the minimum reclaim for %s has no effect: no threshold was set for that signal", reclaimSrc, sig)
		}
	}
	for _, t := range ths {
		if t.Signal == signals.ContainerFsAvailable || t.Signal == signals.ContainerFsInodesFree {
			p.note("%s: %s is replaced: containerfs thresholds are derived from nodefs or imagefs according to the filesystem layout, as the kubelet does", t.Source, t)
		}
	}
	if enforces(s.EnforceNodeAllocatable, enforcePods) {
		ths = p.addAllocatable(ths)
	}
	SortByPriority(ths)
	p.Thresholds = ths
	return p, nil
}

// entry is one signal → value statement and the setting it came from.
type entry struct {
	signal, value, source string
}

// entries lists m in sorted key order.
func entries(m map[string]string, source string) []entry {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]entry, len(keys))
	for i, k := range keys {
		out[i] = entry{k, m[k], source}
	}
	return out
}

// hardEntries applies the kubelet's defaulting (reference §2.2): a nil map
// means the defaults; a non-nil map replaces them, unless MergeDefaults adds
// the default entries it lacks. Either way the operator is told.
func (p *Parsed) hardEntries(s Settings, source string) []entry {
	if s.Hard == nil {
		out := make([]entry, len(defaultHard))
		for i, d := range defaultHard {
			out[i] = entry{string(d.signal), d.value, SourceDefault}
		}
		return out
	}
	out := entries(s.Hard, source)
	var missing []string
	for _, d := range defaultHard {
		if _, ok := s.Hard[string(d.signal)]; ok {
			continue
		}
		missing = append(missing, string(d.signal)+"<"+d.value)
		if s.MergeDefaults {
			out = append(out, entry{string(d.signal), d.value, SourceDefault})
		}
	}
	switch {
	case len(missing) == 0:
	case s.MergeDefaults:
		p.note("merge-defaults added the default hard thresholds missing from %s: %s", source, strings.Join(missing, ", "))
	default:
		p.note("%s replaces the default hard thresholds, so %s no longer apply (as in the kubelet); list them, or set mergeDefaultEvictionSettings, to keep them", source, strings.Join(missing, ", "))
	}
	return out
}

// parseStatements parses threshold statements, skipping the ignored ones.
func (p *Parsed) parseStatements(es []entry) ([]Threshold, error) {
	var out []Threshold
	for _, e := range es {
		t, ok, err := parseStatement(e)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if t.Value.Quantity == nil {
			switch pc := t.Value.Percentage; {
			case pc == 0:
				p.note("%s: %s is a zero threshold and is never met; only the exact text 0%% disables a signal", e.source, t)
			case pc == 1:
				p.note("%s: %s equals the capacity, so it is met as soon as anything is used; only the exact text 100%% disables a signal", e.source, t)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// parseStatement parses one "signal<value" statement with the kubelet's
// rules and texts (reference §2.3), or a "signal>value" stall statement
// (value ">20" in the map). It returns ok == false for "0%" and "100%",
// which disable the signal.
func parseStatement(e entry) (Threshold, bool, error) {
	sig := signals.Signal(e.signal)
	if !sig.Valid() {
		return Threshold{}, false, fmt.Errorf("%s: unsupported eviction signal %s", e.source, e.signal)
	}
	value, above := strings.CutPrefix(e.value, ">")
	switch {
	case sig.Stall() && !above:
		return Threshold{}, false, fmt.Errorf("%s: %s<%s: a memory pressure stall signal takes \">\" (%s>%s): the node is under pressure while the stall is above the value",
			e.source, sig, e.value, sig, e.value)
	case above && !sig.Stall():
		return Threshold{}, false, fmt.Errorf("%s: %s>%s: only the memory.pressure.* stall signals take \">\"; %s takes \"<\" (%s<%s)",
			e.source, sig, value, sig, sig, value)
	case above:
		return parseStallStatement(e, sig, value)
	}
	t := Threshold{Signal: sig, Source: e.source}
	if strings.HasSuffix(e.value, "%") {
		if e.value == "0%" || e.value == "100%" {
			return Threshold{}, false, nil
		}
		pc, err := parsePercentage(e.value)
		if err != nil {
			return Threshold{}, false, fmt.Errorf("%s: %w", e.source, err)
		}
		// Written as !(pc >= 0) so that NaN, which the kubelet lets
		// through, fails here.
		if !(pc >= 0) {
			return Threshold{}, false, fmt.Errorf("%s: eviction percentage threshold %s must be >= 0%%: %s", e.source, sig, e.value)
		}
		if pc > 1 {
			return Threshold{}, false, fmt.Errorf("%s: eviction percentage threshold %s must be <= 100%%: %s", e.source, sig, e.value)
		}
		t.Value.Percentage = pc
		return t, true, nil
	}
	q, err := ParseQuantity(e.value)
	if err != nil {
		return Threshold{}, false, fmt.Errorf("%s: %s<%s: %w", e.source, sig, e.value, err)
	}
	if q.Sign() <= 0 {
		return Threshold{}, false, fmt.Errorf("%s: eviction threshold %s must be positive: %s", e.source, sig, q.String())
	}
	if tooLarge(q) {
		return Threshold{}, false, fmt.Errorf("%s: eviction threshold %s must be less than 9223372036854775807: %s", e.source, sig, e.value)
	}
	t.Value.Quantity = primed(q)
	return t, true, nil
}

// parseStallStatement parses the value of a "signal>value" stall threshold:
// a percentage of time, written "20", "20%" or "20.5", above 0 and below 100,
// with at most two decimals (the resolution the kernel reports).
func parseStallStatement(e entry, sig signals.Signal, value string) (Threshold, bool, error) {
	bp, err := parseStallPercent(value)
	if err != nil {
		return Threshold{}, false, fmt.Errorf("%s: %s>%s: %w", e.source, sig, value, err)
	}
	return Threshold{
		Signal:   sig,
		Operator: GreaterThan,
		Value:    Value{Quantity: primed(*resource.NewQuantity(bp, resource.DecimalSI))},
		Source:   e.source,
	}, true, nil
}

// parseStallPercent parses "20", "20%" or "20.25" into 1/signals.StallScale
// of the time (2000, 2000, 2025) without floating point, so NaN, infinities,
// exponents and signs are errors.
func parseStallPercent(s string) (int64, error) {
	const want = "the stall threshold must be a percentage of time above 0 and below 100, such as 20 or 12.5%, with at most two decimals"
	num := strings.TrimSuffix(s, "%")
	whole, frac, hasPoint := strings.Cut(num, ".")
	if whole == "" || !allDigits(whole) || (hasPoint && (frac == "" || !allDigits(frac))) || len(frac) > 2 {
		return 0, errors.New(want)
	}
	if len(whole) > 3 {
		return 0, errors.New(want)
	}
	w, _ := strconv.ParseInt(whole, 10, 64) // at most 3 digits
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64) // at most 2 digits
		if len(frac) == 1 {
			f *= 10
		}
	}
	bp := w*100 + f
	if bp <= 0 || bp >= signals.StallScale {
		return 0, errors.New(want)
	}
	return bp, nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parsePercentage is the kubelet's: every trailing % is dropped, the rest
// is a float32, divided by 100 in float32. Spaces are not trimmed.
func parsePercentage(s string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimRight(s, "%"), 32)
	if err != nil {
		return 0, err
	}
	return float32(f) / 100, nil
}

// tooLarge reports whether q is the largest int64 or more. The kubelet accepts
// such a quantity, but resource.ParseQuantity caps it at the largest int64
// and its String misprints some (100000000000000000000000 prints as 100):
// as a threshold it would be met on every node and evict every pod, as a
// minimum reclaim it would evict every pod at the first pressure. evictd
// rejects it, naming the value as written.
func tooLarge(q resource.Quantity) bool {
	return q.CmpInt64(math.MaxInt64) >= 0
}

// primed returns a pointer to a copy of q whose string form is already
// cached, so that formatting it later (String caches lazily) never writes.
func primed(q resource.Quantity) *resource.Quantity {
	_ = q.String()
	return &q
}

// parseGracePeriods parses evictionSoftGracePeriod (reference §2.3 step 3).
func parseGracePeriods(m map[string]string, source string) (map[signals.Signal]time.Duration, error) {
	out := make(map[signals.Signal]time.Duration, len(m))
	for _, e := range entries(m, source) {
		sig := signals.Signal(e.signal)
		if !sig.Valid() {
			return nil, fmt.Errorf("%s: unsupported eviction signal %s", source, e.signal)
		}
		d, err := time.ParseDuration(e.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("%s: invalid eviction grace period specified: %s, must be a positive value", source, e.value)
		}
		out[sig] = d
	}
	return out, nil
}

// parseMinimumReclaims parses evictionMinimumReclaim (reference §2.3 step
// 4): a percentage must be positive (0% is an error here), a quantity must
// not be negative (0 is allowed).
func parseMinimumReclaims(m map[string]string, source string) (map[signals.Signal]Value, error) {
	out := make(map[signals.Signal]Value, len(m))
	for _, e := range entries(m, source) {
		sig := signals.Signal(e.signal)
		if !sig.Valid() {
			return nil, fmt.Errorf("%s: unsupported eviction signal %s", source, e.signal)
		}
		if sig.Stall() {
			return nil, fmt.Errorf("%s: %s=%s: minimum reclaim does not apply to a memory pressure stall signal (evicting a pod frees memory, not a share of stalled time); remove it", source, sig, e.value)
		}
		if strings.HasSuffix(e.value, "%") {
			pc, err := parsePercentage(e.value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			// !(pc > 0) also rejects NaN, which the kubelet accepts.
			if !(pc > 0) {
				return nil, fmt.Errorf("%s: eviction percentage minimum reclaim %s must be positive: %s", source, sig, e.value)
			}
			if !finite(float64(pc)) {
				return nil, fmt.Errorf("%s: eviction percentage minimum reclaim %s must be finite: %s", source, sig, e.value)
			}
			out[sig] = Value{Percentage: pc}
			continue
		}
		q, err := ParseQuantity(e.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %s=%s: %w", source, sig, e.value, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: negative eviction minimum reclaim specified for %s", source, sig)
		}
		if tooLarge(q) {
			return nil, fmt.Errorf("%s: eviction minimum reclaim %s must be less than 9223372036854775807: %s", source, sig, e.value)
		}
		out[sig] = Value{Quantity: primed(q)}
	}
	return out, nil
}

// clone returns a copy of v that shares no Quantity with it.
func (v Value) clone() Value {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		v.Quantity = &q
	}
	return v
}

func (p *Parsed) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedSignals[V any](m map[signals.Signal]V) []signals.Signal {
	out := make([]signals.Signal, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func hasSignal(ths []Threshold, sig signals.Signal) bool {
	for _, t := range ths {
		if t.Signal == sig {
			return true
		}
	}
	return false
}
