package main

import (
	"bytes"
	"fmt"
	"html"
)

// gridSVG draws one side's grid as an SVG an operator reads at a glance:
// a column per growth rate, a row per headroom (the largest on top), each
// cell coloured by the share of its runs the kernel's OOM killer reached
// first (green none, amber some, red all) and labelled with the crossing
// → SIGTERM median and p99 (to the hog's own time of receipt; for a
// workload that does not say it, to the CRI log's stamp of its line), the
// crossing → relief median and the OOM kills out of the runs.
func gridSVG(cfg config, side string, results []result) []byte {
	const (
		cellW, cellH = 190, 74
		left, top    = 110, 70
	)
	width := left + cellW*len(cfg.rates) + 20
	height := top + cellH*len(cfg.thresholdsMiB) + 88
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s: where it loses to the OOM killer</text>`+"\n", html.EscapeString(side))
	fmt.Fprintf(&b, `<text x="10" y="42">kubepods limit %d MiB, restartPolicy %s, %s; rows: headroom from the threshold to the limit</text>`+"\n",
		cfg.podsMiB, cfg.restart, runsText(cfg, []string{side}, results))
	for i, rate := range cfg.rates {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%d MiB/s</text>`+"\n", left+i*cellW+cellW/2, top-8, rate)
	}
	for j := range cfg.thresholdsMiB {
		threshold := cfg.thresholdsMiB[len(cfg.thresholdsMiB)-1-j]
		y := top + j*cellH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-weight="bold">%d MiB</text>`+"\n", left-10, y+cellH/2+4, threshold)
		for i, rate := range cfg.rates {
			x := left + i*cellW
			c := cellOf(results, side, threshold, rate)
			fill := "#eeeeee"
			switch {
			case c.runs == 0:
			case c.oom == 0:
				fill = "#c8e6c9"
			case c.oom < c.runs:
				fill = "#ffe0b2"
			default:
				fill = "#ef9a9a"
			}
			dash := ""
			if c.slow(cfg.scaled(rate)) {
				dash = ` stroke-dasharray="6 4" stroke-width="2"`
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#555"%s/>`+"\n", x, y, cellW, cellH, fill, dash)
			if c.runs == 0 {
				fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">not run</text>`+"\n", x+cellW/2, y+cellH/2+4)
				continue
			}
			// The hog's own time of receipt when its line has one; the
			// CRI log's stamp of the line otherwise.
			signal := fmt.Sprintf("SIGTERM logged %s ms (p99 %s)", median(c.term, whole), p99(c.term, whole))
			if len(c.received) > 0 {
				signal = fmt.Sprintf("SIGTERM received %s ms (p99 %s)", median(c.received, whole), p99(c.received, whole))
			}
			lines := []string{
				signal,
				fmt.Sprintf("relief %s ms (p99 %s)", median(c.relief, whole), p99(c.relief, whole)),
				fmt.Sprintf("OOM kills %d/%d, ramp %s MiB/s", c.oom, c.runs, median(c.ramp, whole)),
			}
			for k, l := range lines {
				fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x+cellW/2, y+22+k*18, html.EscapeString(l))
			}
		}
	}
	ly := top + cellH*len(cfg.thresholdsMiB) + 24
	for k, l := range []struct{ fill, text string }{{"#c8e6c9", "no OOM kill"}, {"#ffe0b2", "some runs OOM-killed first"}, {"#ef9a9a", "every run OOM-killed first"}} {
		x := 10 + k*210
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s" stroke="#555"/><text x="%d" y="%d">%s</text>`+"\n", x, ly, l.fill, x+20, ly+12, l.text)
	}
	fmt.Fprintf(&b, `<text x="10" y="%d">times from the crossing of the threshold (the harness's %s poll): the hog's SIGTERM (received, by its clock), and available memory back above the threshold</text>`+"\n", ly+36, cfg.poll)
	fmt.Fprintf(&b, `<text x="10" y="%d">ramp: the hog's measured growth to the crossing (median); a dashed cell ran under %.0f%% of its column's rate</text>`+"\n", ly+54, reachedShare*100)
	b.WriteString("</svg>\n")
	return b.Bytes()
}
