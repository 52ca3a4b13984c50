package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// signalFamily is evictd's histogram of the time from a hard eviction's
// decision to its pod's first stop signal, by path (direct or runtime).
const signalFamily = "evictd_eviction_signal_latency_seconds"

// signalTotals is that histogram's count and sum per path at one moment.
type signalTotals map[string]struct {
	count uint64
	sum   float64
}

// readSignalTotals scrapes evictd's /metrics for signalFamily.
func readSignalTotals(ctx context.Context, n *testnode.Node) (signalTotals, error) {
	text, err := n.EvictdGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return parseSignalTotals(text)
}

func parseSignalTotals(text string) (signalTotals, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("evictd's /metrics: %w", err)
	}
	out := signalTotals{}
	fam, ok := fams[signalFamily]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		path := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "path" {
				path = l.GetValue()
			}
		}
		h := m.GetHistogram()
		t := out[path]
		t.count += h.GetSampleCount()
		t.sum += h.GetSampleSum()
		out[path] = t
	}
	return out, nil
}

// signalledBetween is the one first stop signal counted from before to
// after: its path and its time from the decision. ok is false unless
// exactly one was counted (a run evicts one hog).
func signalledBetween(before, after signalTotals) (path string, d time.Duration, ok bool) {
	n := 0
	for p, a := range after {
		b := before[p]
		if a.count == b.count {
			continue
		}
		n += int(a.count - b.count)
		path, d = p, time.Duration((a.sum-b.sum)*float64(time.Second))
	}
	return path, d, n == 1
}
