package agent

import (
	"log/slog"
	"path/filepath"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/recorder"
	"github.com/evictd/evictd/signals"
)

// RecordsDir is where the flight records are kept under --state-dir.
func RecordsDir(stateDir string) string { return filepath.Join(stateDir, "records") }

// newRecorder is the flight recorder of cfg, nil with --flight-records=0.
func newRecorder(cfg *config.Config, layout signals.FsLayout, version string, met *metrics.Metrics, log *slog.Logger) (*recorder.Recorder, error) {
	if cfg.FlightRecords == 0 {
		return nil, nil
	}
	dc := DeciderConfig(cfg, layout)
	return recorder.New(recorder.Config{
		Dir:        RecordsDir(cfg.StateDir),
		MaxRecords: cfg.FlightRecords,
		MaxBytes:   cfg.FlightRecordsMaxBytes,
		Window:     recorder.Window(dc.Thresholds, cfg.HousekeepingInterval),
		Args:       recorder.Args(dc, cfg.HousekeepingInterval, cfg.HugepageAwareEviction),
		Layout:     layout.String(),
		Node:       cfg.NodeName,
		Version:    version,
		Log:        log.With("component", "flight-recorder"),
		Metrics:    met,
	})
}
