package thresholds

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

// The setting names FuzzParse passes, so that errors can be checked for them.
const (
	fuzzHard    = "fuzz evictionHard"
	fuzzSoft    = "fuzz evictionSoft"
	fuzzGrace   = "fuzz evictionSoftGracePeriod"
	fuzzReclaim = "fuzz evictionMinimumReclaim"
)

// FuzzParse parses one signal's value as a hard and a soft threshold, with
// a grace period and a minimum reclaim (an empty grace period means no soft
// threshold, an empty minimum reclaim none). Whatever the text, Parse
// returns an error that names the setting at fault, or thresholds whose
// values are in range and that read back the same from their written form.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, signal, value, grace, reclaim string) {
		s := Settings{
			Hard: map[string]string{signal: value}, HardSource: fuzzHard,
			SoftSource: fuzzSoft, SoftGracePeriodSource: fuzzGrace, MinimumReclaimSource: fuzzReclaim,
			EnforceNodeAllocatable: []string{"pods"},
		}
		if grace != "" {
			s.Soft = map[string]string{signal: value}
			s.SoftGracePeriod = map[string]string{signal: grace}
		}
		if reclaim != "" {
			s.MinimumReclaim = map[string]string{signal: reclaim}
		}
		p, err := Parse(s)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, fuzzHard+": ") && !strings.HasPrefix(msg, fuzzSoft+": ") &&
				!strings.HasPrefix(msg, fuzzGrace+": ") && !strings.HasPrefix(msg, fuzzReclaim+": ") {
				t.Fatalf("error %q does not start with the setting it is about", msg)
			}
			if p.Thresholds != nil || p.Notes != nil {
				t.Fatalf("error %q with a result %+v", msg, p)
			}
			return
		}
		for _, th := range p.Thresholds {
			checkThreshold(t, th)
			if th.Source != fuzzHard && th.Source != fuzzSoft {
				continue
			}
			// The written form reads back as the same threshold.
			written := FormatValue(th)
			if th.Operator == GreaterThan {
				written = ">" + written
			}
			again, err := Parse(Settings{Hard: map[string]string{string(th.Signal): written}})
			if err != nil {
				t.Fatalf("%s, written %q, does not parse: %v", th, written, err)
			}
			i := indexOfKey(again.Thresholds, Key{Signal: th.Signal})
			if i < 0 {
				t.Fatalf("%s, written %q, parses to no threshold", th, written)
			}
			if !sameValue(again.Thresholds[i].Value, th.Value) {
				t.Fatalf("%s, written %q, reads back as %s", th, written, again.Thresholds[i])
			}
			if th.Soft {
				back, err := time.ParseDuration(th.GracePeriod.String())
				if err != nil || back != th.GracePeriod {
					t.Fatalf("%s: grace period %s reads back as %s (%v)", th, th.GracePeriod, back, err)
				}
			}
			if mr := th.MinReclaim; mr != nil {
				again, err := parseMinimumReclaims(map[string]string{string(th.Signal): mr.String()}, fuzzReclaim)
				if err != nil || !sameValue(again[th.Signal], *mr) {
					t.Fatalf("%s: minimum reclaim %s reads back as %v (%v)", th, mr, again[th.Signal], err)
				}
			}
		}
	})
}

// checkThreshold fails t unless th is a threshold Parse may return: a known
// signal, a positive quantity (a stall strictly between 0 and 100%) or a
// finite percentage in [0, 1], a non-negative grace period, and a minimum
// reclaim that is a non-negative quantity or a positive finite percentage.
func checkThreshold(t *testing.T, th Threshold) {
	t.Helper()
	if !th.Signal.Valid() {
		t.Fatalf("%s: unknown signal", th.Describe())
	}
	if th.Operator == GreaterThan != th.Signal.Stall() {
		t.Fatalf("%s: operator %s for signal %s", th.Describe(), th.Operator, th.Signal)
	}
	switch v := th.Value; {
	case th.Signal.Stall():
		if v.Quantity == nil {
			t.Fatalf("%s: a stall threshold without a quantity", th.Describe())
		}
		if n := quantityInt64(v.Quantity); n <= 0 || n >= signals.StallScale {
			t.Fatalf("%s: stall %d outside (0, %d)", th.Describe(), n, signals.StallScale)
		}
	case v.Quantity != nil:
		if v.Quantity.Sign() <= 0 {
			t.Fatalf("%s: quantity not positive", th.Describe())
		}
	default:
		if pc := float64(v.Percentage); !finite(pc) || pc < 0 || pc > 1 {
			t.Fatalf("%s: percentage %v outside [0, 1]", th.Describe(), v.Percentage)
		}
	}
	if th.GracePeriod < 0 || (!th.Soft && th.GracePeriod != 0) {
		t.Fatalf("%s: grace period %s", th.Describe(), th.GracePeriod)
	}
	if mr := th.MinReclaim; mr != nil {
		if mr.Quantity != nil && mr.Quantity.Sign() < 0 {
			t.Fatalf("%s: negative minimum reclaim", th.Describe())
		}
		if pc := float64(mr.Percentage); mr.Quantity == nil && (!finite(pc) || pc <= 0) {
			t.Fatalf("%s: minimum reclaim percentage %v not positive and finite", th.Describe(), mr.Percentage)
		}
	}
}

// sameValue reports whether a and b are the same amount.
func sameValue(a, b Value) bool {
	if (a.Quantity == nil) != (b.Quantity == nil) {
		return false
	}
	if a.Quantity != nil {
		return a.Quantity.Cmp(*b.Quantity) == 0
	}
	return a.Percentage == b.Percentage
}
