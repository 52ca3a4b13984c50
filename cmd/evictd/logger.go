package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/evictd/evictd/systemd"
)

// newLogger writes records at level and above to w in format, "text"
// (key=value) or "json" (slog's handlers). When w is the stderr systemd
// connected to the journal, each line starts with its syslog priority, in
// either format, so that journald records it (systemd.NewJournalHandler).
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	newHandler := func(w io.Writer) slog.Handler {
		if format == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
	if f, ok := w.(*os.File); ok && systemd.IsJournalStream(f) {
		return slog.New(systemd.NewJournalHandler(w, newHandler))
	}
	return slog.New(newHandler(w))
}
