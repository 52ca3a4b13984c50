package decide

import (
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Time to exhaustion (--eviction-time-to-exhaustion): a hard memory
// threshold not met yet is acted on as if it were when the memory
// signal's available amount, falling at the rate its recent readings
// show, reaches 0 (the OOM point: the machine's memory for
// memory.available, the kubepods limit for allocatableMemory.available)
// sooner than evictd's own measured time from a decision to the victim's
// memory released, plus a margin. The threshold stays the floor: a
// prediction only ever acts earlier than the threshold would.

// Defaults of the growth estimate and of the release estimate.
const (
	// DefaultGrowthWindow is how far back the readings that give the
	// growth rate reach.
	DefaultGrowthWindow = time.Second
	// DefaultMinGrowthReadings is how many readings within the window a
	// growth rate needs.
	DefaultMinGrowthReadings = 5
	// minGrowthFit is the least share of the readings' variation a
	// straight line must explain (R²) for its slope to be trusted: below
	// it, the readings are noise, not growth.
	minGrowthFit = 0.9
	// DefaultRelease is the release estimate before any release has been
	// measured: conservative for a pod killed at once, whose memory goes
	// within tens of milliseconds.
	DefaultRelease = time.Second
	// ReleaseWindow is how many of the last measured releases the
	// estimate is taken from.
	ReleaseWindow = 20
	// releaseQuantile is the share of those releases the estimate covers.
	releaseQuantile = 0.9
)

// ExhaustionConfig turns time-to-exhaustion decisions on; the zero value
// leaves them off.
type ExhaustionConfig struct {
	// Enabled is --eviction-time-to-exhaustion.
	Enabled bool
	// Margin is --eviction-time-to-exhaustion-margin, added to the
	// release estimate.
	Margin time.Duration
	// Window and MinReadings bound the growth estimate; 0 means
	// DefaultGrowthWindow and DefaultMinGrowthReadings.
	Window      time.Duration
	MinReadings int
}

func (c ExhaustionConfig) window() time.Duration {
	if c.Window <= 0 {
		return DefaultGrowthWindow
	}
	return c.Window
}

func (c ExhaustionConfig) minReadings() int {
	if c.MinReadings <= 0 {
		return DefaultMinGrowthReadings
	}
	return max(c.MinReadings, 3) // a line through two points fits any two
}

// Growth is how fast a signal's available amount falls, fitted by least
// squares to its readings within a window.
type Growth struct {
	// Rate is the memory consumed, in bytes a second: positive while
	// available falls.
	Rate float64
	// Readings and Span are how many readings the fit took, and the time
	// from the first to the last.
	Readings int
	Span     time.Duration
	// Fit is the share of the readings' variation the line explains (R²).
	Fit float64
}

// GrowthOf fits a line to sig's readings in reads taken within window
// before now (now included) and returns its growth. It is false when the
// readings cannot tell: fewer than minReadings of them, spread over less
// than a tenth of the window, or no line explains them well enough
// (noise).
func GrowthOf(reads []signals.Observation, sig signals.Signal, now time.Time, window time.Duration, minReadings int) (Growth, bool) {
	from := now.Add(-window)
	var n float64
	var first, last time.Time
	var sx, sy float64
	for _, r := range reads {
		if r.Signal != sig || r.Time.Before(from) || r.Time.After(now) {
			continue
		}
		if first.IsZero() || r.Time.Before(first) {
			first = r.Time
		}
		if r.Time.After(last) {
			last = r.Time
		}
		n++
		sx += r.Time.Sub(now).Seconds()
		sy += float64(r.Available)
	}
	g := Growth{Readings: int(n), Span: last.Sub(first)}
	if g.Readings < minReadings || g.Span < window/10 {
		return g, false
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for _, r := range reads {
		if r.Signal != sig || r.Time.Before(from) || r.Time.After(now) {
			continue
		}
		dx, dy := r.Time.Sub(now).Seconds()-mx, float64(r.Available)-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return g, false // flat, or no spread in time
	}
	g.Rate = -sxy / sxx
	g.Fit = sxy * sxy / (sxx * syy)
	if math.IsNaN(g.Rate) || math.IsInf(g.Rate, 0) || g.Fit < minGrowthFit {
		return g, false
	}
	return g, true
}

// Prediction is a hard memory threshold acted on before it is met,
// because its signal runs out sooner than evictd can release memory.
type Prediction struct {
	// Threshold is the hard threshold acted on as if met.
	Threshold thresholds.Threshold `json:"-"`
	// Available is the signal's available amount at the pass, in bytes.
	Available int64 `json:"available"`
	// Rate is the growth, in bytes a second.
	Rate float64 `json:"rate"`
	// TimeLeft is Available / Rate: when the signal reaches 0.
	TimeLeft time.Duration `json:"timeLeft"`
	// Release and Margin are the release estimate and the margin
	// TimeLeft was found below.
	Release time.Duration `json:"release"`
	Margin  time.Duration `json:"margin"`
	// Readings is how many readings the growth was fitted to.
	Readings int `json:"readings"`
}

// Predict looks, in the order of priority, for a hard memory threshold
// of ths not met in ev whose signal, as observed in obs and falling at
// the growth reads show, runs out before release plus cfg's margin.
// Nothing is predicted while cfg is off, while any hard memory threshold
// is met (the threshold itself acts, or holds), or for a signal without
// an observation within the growth window, with no growth or one the
// readings cannot tell from noise.
func Predict(cfg ExhaustionConfig, now time.Time, ths []thresholds.Threshold, ev thresholds.Evaluation, obs signals.Observations,
	reads []signals.Observation, release time.Duration) (Prediction, bool) {
	if !cfg.Enabled {
		return Prediction{}, false
	}
	for _, th := range ev.Met {
		if Exhaustible(th) {
			return Prediction{}, false
		}
	}
	cands := slices.Clone(ths)
	thresholds.SortByPriority(cands)
	for _, th := range cands {
		if !Exhaustible(th) {
			continue
		}
		o, ok := obs[th.Signal]
		if !ok || o.Available <= 0 || now.Sub(o.Time) > cfg.window() {
			continue // none, exhausted already (the threshold acts), or stale
		}
		g, ok := GrowthOf(reads, th.Signal, now, cfg.window(), cfg.minReadings())
		if !ok || g.Rate <= 0 {
			continue
		}
		// In seconds first: a slow growth under a large amount would
		// overflow a Duration.
		secs := float64(o.Available) / g.Rate
		if !(secs < (release + cfg.Margin).Seconds()) {
			continue
		}
		left := time.Duration(secs * float64(time.Second))
		return Prediction{Threshold: th, Available: o.Available, Rate: g.Rate, TimeLeft: left,
			Release: release, Margin: cfg.Margin, Readings: g.Readings}, true
	}
	return Prediction{}, false
}

// Exhaustible reports whether th is a threshold time to exhaustion may
// act on early: a hard memory.available or allocatableMemory.available
// one.
func Exhaustible(th thresholds.Threshold) bool {
	return th.Hard() && th.Operator == thresholds.LessThan &&
		(th.Signal == signals.MemoryAvailable || th.Signal == signals.AllocatableMemoryAvailable)
}

// Apply returns ev with p's threshold actionable first, as if met; the
// rest of ev (met thresholds, pressures) is left as observed.
func (p Prediction) Apply(ev thresholds.Evaluation) thresholds.Evaluation {
	ev.Actionable = append([]thresholds.Threshold{p.Threshold}, ev.Actionable...)
	return ev
}

// Words says the prediction in a clause: "memory.available predicted to
// run out in 420ms at 800Mi/s; threshold memory.available<500Mi not met
// yet".
func (p Prediction) Words() string {
	return fmt.Sprintf("%s predicted to run out in %s at %s/s; threshold %s not met yet",
		p.Threshold.Signal, p.TimeLeft.Round(time.Millisecond), rate(p.Rate), thresholds.Format(p.Threshold))
}

// RateBytes is the growth in whole bytes a second, at most MaxInt64.
func (p Prediction) RateBytes() int64 { return clampBytes(p.Rate) }

func clampBytes(r float64) int64 {
	if r >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(int64(math.Round(r)), 0)
}

// rate prints a growth in bytes a second the way quantities are printed,
// to the nearest MiB/s.
func rate(r float64) string {
	mib := math.Round(r / (1 << 20))
	if mib < 1 || mib >= math.MaxInt64>>20 {
		return resource.NewQuantity(clampBytes(r), resource.BinarySI).String()
	}
	return resource.NewQuantity(int64(mib)<<20, resource.BinarySI).String()
}

// ReleaseEstimate keeps the last ReleaseWindow measured releases (from a
// decision to the victim's memory released) and estimates the next one
// as their 90th percentile, DefaultRelease before any is measured. It is
// owned by one goroutine.
type ReleaseEstimate struct {
	last []time.Duration
}

// Add counts one measured release; a negative one is none.
func (r *ReleaseEstimate) Add(d time.Duration) {
	if d < 0 {
		return
	}
	r.last = append(r.last, d)
	if len(r.last) > ReleaseWindow {
		r.last = slices.Delete(r.last, 0, len(r.last)-ReleaseWindow)
	}
}

// Estimate is the 90th percentile of the releases kept (the nearest
// rank), or DefaultRelease when none is.
func (r *ReleaseEstimate) Estimate() time.Duration {
	if len(r.last) == 0 {
		return DefaultRelease
	}
	s := slices.Clone(r.last)
	slices.Sort(s)
	i := int(math.Ceil(releaseQuantile*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Measured is how many releases the estimate is taken from.
func (r *ReleaseEstimate) Measured() int { return len(r.last) }
