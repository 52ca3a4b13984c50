package config

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/evictd/evictd/thresholds"
)

// FormatThresholds writes c's effective thresholds as an aligned table, one
// line per threshold in c.Thresholds' order: signal, operator, value as
// written, grace period, minimum reclaim, hard or soft, and source. It is
// what `evictd check-config` prints.
func FormatThresholds(w io.Writer, c *Config) error {
	if c == nil {
		return errors.New("format thresholds: nil Config")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tOP\tVALUE\tGRACE\tMIN-RECLAIM\tKIND\tSOURCE")
	for _, t := range c.Thresholds {
		grace, kind := "-", t.Kind()
		if t.Soft {
			grace = t.GracePeriod.String()
			if t.GracePeriod == 0 {
				kind = "soft (as hard)"
			}
		}
		reclaim := "-"
		if t.MinReclaim != nil {
			reclaim = asWritten(c.Settings.MinimumReclaim, string(t.Signal), *t.MinReclaim)
		}
		value := t.Value.String()
		if t.Source == mapSource(c.Settings, t.Soft) {
			m := c.Settings.Hard
			if t.Soft {
				m = c.Settings.Soft
			}
			value = asWritten(m, string(t.Signal), t.Value)
		}
		if t.Operator == thresholds.GreaterThan {
			value = strings.TrimPrefix(value, ">")
			if t.Source != mapSource(c.Settings, t.Soft) {
				value = thresholds.FormatValue(t)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Signal, t.Operator, value, grace, reclaim, kind, t.Source)
	}
	if len(c.Thresholds) == 0 {
		fmt.Fprintln(tw, "(none: evictd will not evict)")
	}
	return tw.Flush()
}

// mapSource is the source name thresholds.Parse gives to thresholds from
// the Hard or Soft map.
func mapSource(s thresholds.Settings, soft bool) string {
	switch {
	case soft && s.SoftSource != "":
		return s.SoftSource
	case soft:
		return "--eviction-soft"
	case s.HardSource != "":
		return s.HardSource
	}
	return "--eviction-hard"
}

// asWritten returns m[signal], the value as the operator wrote it, when m
// has it; otherwise v formatted.
func asWritten(m map[string]string, signal string, v thresholds.Value) string {
	if raw, ok := m[signal]; ok {
		return raw
	}
	return v.String()
}
