package decide

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// readings are n readings of sig every step up to t0, the last at t0,
// available at t0 being last and each reading before it perStep more,
// plus noise[i] on the i-th (from the oldest) when given.
func readings(sig signals.Signal, n int, step time.Duration, last, perStep int64, noise ...int64) []signals.Observation {
	out := make([]signals.Observation, 0, n)
	for i := range n {
		back := int64(n - 1 - i)
		o := signals.Observation{Signal: sig, Available: last + back*perStep, Capacity: 4096 * mi, Time: t0.Add(-time.Duration(back) * step)}
		if i < len(noise) {
			o.Available += noise[i]
		}
		out = append(out, o)
	}
	return out
}

// TestPredict: the prediction acts only on a steady fall whose time to
// reach 0 is below the release estimate plus the margin, for a hard
// memory threshold not met yet.
func TestPredict(t *testing.T) {
	on := ExhaustionConfig{Enabled: true, Margin: 500 * time.Millisecond}
	mem := signals.MemoryAvailable
	obsAt := func(avail int64, at time.Time) signals.Observations {
		return signals.Observations{mem: {Signal: mem, Available: avail, Capacity: 4096 * mi, Time: at}}
	}
	hard := []thresholds.Threshold{hardThreshold(t, "memory.available", "500Mi")}
	soft, err := thresholds.Parse(thresholds.Settings{
		Hard:            map[string]string{"nodefs.available": "10%"},
		Soft:            map[string]string{"memory.available": "500Mi"},
		SoftGracePeriod: map[string]string{"memory.available": "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 800Mi/s: 80Mi every 100ms.
	fast := readings(mem, 11, 100*time.Millisecond, 700*mi, 80*mi)
	for _, tc := range []struct {
		name  string
		cfg   ExhaustionConfig
		ths   []thresholds.Threshold
		met   bool
		avail int64
		// age is the observation's age at the pass.
		age     time.Duration
		reads   []signals.Observation
		release time.Duration
		want    bool
		// wantLeft is the predicted time left, to the millisecond.
		wantLeft time.Duration
	}{
		// 700Mi at 800Mi/s: 875ms < 1s + 500ms.
		{name: "fast", cfg: on, ths: hard, avail: 700 * mi, reads: fast, release: time.Second, want: true, wantLeft: 875 * time.Millisecond},
		{name: "off", cfg: ExhaustionConfig{}, ths: hard, avail: 700 * mi, reads: fast, release: time.Second},
		// 40Mi/s: 17.5s left.
		{name: "slow", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 4*mi), release: time.Second},
		// Slow, but the measured release is longer.
		{name: "slow, slower release", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 4*mi), release: 20 * time.Second, want: true, wantLeft: 17500 * time.Millisecond},
		{name: "flat", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 0), release: time.Second},
		{name: "rising", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, -80*mi), release: time.Second},
		// Readings jumping ±300Mi around a slight fall: no line fits.
		{name: "noisy", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 10*mi,
			300*mi, -300*mi, 300*mi, -300*mi, 300*mi, -300*mi, 300*mi, -300*mi, 300*mi, -300*mi, 300*mi), release: time.Second},
		// Small noise on a fast fall still fits.
		{name: "fast with small noise", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 80*mi,
			5*mi, -5*mi, 5*mi, -5*mi, 5*mi, -5*mi, 5*mi, -5*mi, 5*mi, -5*mi, 0), release: time.Second, want: true, wantLeft: 873 * time.Millisecond},
		{name: "too few readings", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 4, 100*time.Millisecond, 700*mi, 80*mi), release: time.Second},
		// Five readings 1ms apart: too short a span to tell a rate.
		{name: "too short a span", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 5, time.Millisecond, 700*mi, mi), release: time.Second},
		// Readings older than the window count for nothing.
		{name: "stale readings", cfg: on, ths: hard, avail: 700 * mi, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 80*mi)[:3], release: time.Second},
		{name: "threshold met: the threshold acts", cfg: on, ths: hard, met: true, avail: 400 * mi, reads: fast, release: time.Second},
		{name: "soft only", cfg: on, ths: soft.Thresholds, avail: 700 * mi, reads: fast, release: time.Second},
		{name: "other signal's readings", cfg: on, ths: hard, avail: 700 * mi, reads: readings(signals.AllocatableMemoryAvailable, 11, 100*time.Millisecond, 700*mi, 80*mi), release: time.Second},
		// 1 byte a second under 8Ei: 292 billion years, no overflow.
		{name: "slowest growth, most memory", cfg: on, ths: hard, avail: 1<<63 - 1, reads: readings(mem, 11, 100*time.Millisecond, 700*mi, 0,
			10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), release: time.Second},
		{name: "stale observation", cfg: on, ths: hard, avail: 700 * mi, age: 2 * time.Second, reads: fast, release: time.Second},
		{name: "nothing available", cfg: on, ths: hard, avail: 0, reads: fast, release: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := thresholds.Evaluation{}
			if tc.met {
				ev.Met = tc.ths
				ev.Actionable = tc.ths
			}
			p, got := Predict(tc.cfg, t0, tc.ths, ev, obsAt(tc.avail, t0.Add(-tc.age)), tc.reads, tc.release)
			if got != tc.want {
				t.Fatalf("predicted: got %v, want %v (%+v)", got, tc.want, p)
			}
			if !got {
				return
			}
			if left := p.TimeLeft.Round(time.Millisecond); left != tc.wantLeft {
				t.Errorf("time left: got %s, want %s", left, tc.wantLeft)
			}
			if p.Threshold.Key() != tc.ths[0].Key() || p.Release != tc.release || p.Margin != tc.cfg.Margin {
				t.Errorf("got %+v, want threshold %s, release %s, margin %s", p, thresholds.Format(tc.ths[0]), tc.release, tc.cfg.Margin)
			}
		})
	}
}

// TestGrowthOf: the least-squares rate of fall, in bytes a second.
func TestGrowthOf(t *testing.T) {
	mem := signals.MemoryAvailable
	for _, tc := range []struct {
		name     string
		reads    []signals.Observation
		want     bool
		wantRate float64
	}{
		{"800Mi/s", readings(mem, 11, 100*time.Millisecond, 700*mi, 80*mi), true, 800 * float64(mi)},
		{"10ms readings at 226Mi/s", readings(mem, 101, 10*time.Millisecond, 700*mi, 2314*1024*10/100), true, 2314 * 1024 * 10 / 100 * 100},
		{"rising", readings(mem, 11, 100*time.Millisecond, 700*mi, -80*mi), true, -800 * float64(mi)},
		{"flat", readings(mem, 11, 100*time.Millisecond, 700*mi, 0), false, 0},
		{"one reading", readings(mem, 1, 100*time.Millisecond, 700*mi, 0), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := GrowthOf(tc.reads, mem, t0, DefaultGrowthWindow, DefaultMinGrowthReadings)
			if ok != tc.want {
				t.Fatalf("ok: got %v, want %v (%+v)", ok, tc.want, g)
			}
			if ok && math.Abs(g.Rate-tc.wantRate) > math.Abs(tc.wantRate)/1000 {
				t.Errorf("rate: got %.0f, want %.0f", g.Rate, tc.wantRate)
			}
		})
	}
}

// TestReleaseEstimate: the 90th percentile of the last releases, the
// default before any.
func TestReleaseEstimate(t *testing.T) {
	var r ReleaseEstimate
	if got := r.Estimate(); got != DefaultRelease {
		t.Errorf("before any: got %s, want %s", got, DefaultRelease)
	}
	r.Add(-time.Second)
	if got := r.Measured(); got != 0 {
		t.Errorf("a negative release counted: %d", got)
	}
	for i := 1; i <= 10; i++ {
		r.Add(time.Duration(i) * 100 * time.Millisecond)
	}
	if got, want := r.Estimate(), 900*time.Millisecond; got != want {
		t.Errorf("ten releases: got %s, want %s", got, want)
	}
	for range ReleaseWindow {
		r.Add(50 * time.Millisecond)
	}
	if got, want := r.Estimate(), 50*time.Millisecond; got != want {
		t.Errorf("after %d more: got %s, want %s (the old ones dropped)", ReleaseWindow, got, want)
	}
}

// TestDecidePredicted: a prediction decides as the hard threshold would,
// marked and worded as predicted.
func TestDecidePredicted(t *testing.T) {
	th := hardThreshold(t, "memory.available", "500Mi")
	d := NewDecider(DeciderConfig{Thresholds: []thresholds.Threshold{th}, TransitionPeriod: time.Minute})
	obs := signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 700 * mi, Capacity: 4096 * mi, Time: t0}}
	pods := []signals.Pod{{Namespace: "default", Name: "hog", UID: "hog", QOS: signals.BestEffort,
		Containers: []signals.Container{{Name: "alloc"}}}}
	stats := map[string]signals.PodStats{"hog": {UID: "hog", MemoryWorkingSet: i64(900 * mi),
		Containers: []signals.ContainerStats{{Name: "alloc", MemoryWorkingSet: i64(900 * mi)}}}}
	ev := d.Evaluate(t0, obs)
	if len(ev.Met) != 0 {
		t.Fatalf("the threshold is met: %v", ev.Met)
	}
	p := &Prediction{Threshold: th, Available: 700 * mi, Rate: 800 * float64(mi), TimeLeft: 875 * time.Millisecond,
		Release: time.Second, Margin: 500 * time.Millisecond, Readings: 11}
	dec := d.DecidePredicted(t0, ev, p, obs, pods, stats)
	if dec.Outcome != OutcomeEvict || dec.Pod == nil || dec.Pod.Name != "hog" || !dec.Hard || dec.GracePeriod != 1 || dec.Predicted != p {
		t.Fatalf("got %s %v hard=%v grace=%d predicted=%v, want evict hog hard with 1s, predicted", dec.Outcome, dec.Pod, dec.Hard, dec.GracePeriod, dec.Predicted)
	}
	const words = "memory.available predicted to run out in 875ms at 800Mi/s; threshold memory.available<500Mi not met yet"
	if want := "The node was low on resource: memory. Threshold quantity: 500Mi, available: 700Mi. " +
		"Container alloc was using 900Mi, request is 0, has larger consumption of memory. " + words + "."; dec.Message != want {
		t.Errorf("message:\n got %q\nwant %q", dec.Message, want)
	}
	if !strings.Contains(dec.Reason, "time to exhaustion: "+words) || !strings.Contains(dec.Reason, "default/hog ranks first") {
		t.Errorf("reason: got %q", dec.Reason)
	}
	if len(dec.Evaluation.Actionable) != 0 {
		t.Errorf("the decision's evaluation is not as observed: actionable %v", dec.Evaluation.Actionable)
	}
	if plain := d.DecideEvaluated(t0, ev, obs, pods, stats); plain.Outcome != OutcomeNone {
		t.Errorf("without the prediction: got %s, want none", plain.Outcome)
	}
}
