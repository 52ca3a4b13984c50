package systemd

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// IsJournalStream reports whether f is the stream systemd connected to the
// journal: the unit's StandardError=journal (the default) sets
// JOURNAL_STREAM to "<device>:<inode>" of that stream, which a process
// compares with its stderr (sd-daemon(3), systemd.exec(5)). It is false
// when evictd runs by hand, in a test, or with its stderr redirected.
func IsJournalStream(f *os.File) bool {
	devText, inoText, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	dev, err := strconv.ParseUint(devText, 10, 64)
	if err != nil {
		return false
	}
	ino, err := strconv.ParseUint(inoText, 10, 64)
	if err != nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == dev && st.Ino == ino
}

// NewJournalHandler returns a handler that writes each record as the
// handler newInner returns for its writer would, but with the line starting
// with the record's syslog priority, "<3>" for an error to "<7>" for debug
// (sd-daemon(3)'s SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG). journald strips
// the prefix and records the priority, so `journalctl -p warning` finds
// evictd's warnings; the message it stores, text or JSON, is the line
// without it. newInner must return one of slog's Text or JSON handlers, or
// another that writes a record in one Write.
func NewJournalHandler(w io.Writer, newInner func(io.Writer) slog.Handler) slog.Handler {
	out := &priorityWriter{w: w}
	return &journalHandler{inner: newInner(out), out: out}
}

type journalHandler struct {
	inner slog.Handler
	out   *priorityWriter
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = priority(r.Level)
	return h.inner.Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &journalHandler{inner: h.inner.WithAttrs(attrs), out: h.out}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: h.inner.WithGroup(name), out: h.out}
}

// priorityWriter writes each line with the prefix of the record being
// handled; the handlers derived from one NewJournalHandler share it, and
// hold mu while they write through it.
type priorityWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	// One write per line, so that lines from elsewhere (a panic's
	// trace) cannot come between the prefix and its line.
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

// ErrorLines returns a writer that starts every line written to w with
// the error priority "<3>": for what evictd writes to the journal before
// its logger exists (a flag or configuration it refuses), so that
// `journalctl -p err` finds it.
func ErrorLines(w io.Writer) io.Writer {
	return &errorLines{w: w, lineStart: true}
}

type errorLines struct {
	w         io.Writer
	lineStart bool
}

func (e *errorLines) Write(b []byte) (int, error) {
	var out []byte
	for _, c := range b {
		if e.lineStart {
			out = append(out, "<3>"...)
		}
		out = append(out, c)
		e.lineStart = c == '\n'
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// priority is the sd-daemon prefix of a level; a level between two of
// slog's takes the less severe one's.
func priority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>" // SD_ERR
	case l >= slog.LevelWarn:
		return "<4>" // SD_WARNING
	case l >= slog.LevelInfo:
		return "<6>" // SD_INFO
	}
	return "<7>" // SD_DEBUG
}
