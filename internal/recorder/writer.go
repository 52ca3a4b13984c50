package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/snapshot"
)

// writer writes records into the directory it holds open: every name is
// resolved inside it (os.Root), so no link in it leads a write elsewhere.
type writer struct {
	cfg  Config
	root *os.Root
	// failing is the last error said, so that a full disk is said once,
	// and its end too.
	failing string
}

// newWriter creates cfg.Dir (0700) when missing, tightens its mode when it
// is wider, and opens it.
func newWriter(cfg Config) (*writer, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, err
	}
	st, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := root.Chmod(".", 0o700); err != nil {
			root.Close()
			return nil, fmt.Errorf("make %s private (mode %v): %w", cfg.Dir, st.Mode().Perm(), err)
		}
	}
	return &writer{cfg: cfg, root: root}, nil
}

func (w *writer) close() { w.root.Close() }

// IsRecordName reports whether name is a record's file name.
func IsRecordName(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}

// write writes f as name (through a temporary file renamed over it, so a
// reader never sees half a record), then removes the oldest records past
// the bounds. A failure is counted and said once.
func (w *writer) write(name string, f *snapshot.File) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	err := enc.Encode(f)
	if err == nil {
		err = w.put(name, b.Bytes())
	}
	if err != nil {
		w.cfg.Metrics.CountFlightRecord(metrics.RecordFailed)
		if kind := failure(err); kind != w.failing {
			w.cfg.Log.Warn("flight recorder: a record could not be written; evictions go on without it", "dir", w.cfg.Dir, "record", name, "err", err)
			w.failing = kind
		}
		return
	}
	if w.failing != "" {
		w.cfg.Log.Info("flight recorder: records are written again", "dir", w.cfg.Dir, "was", w.failing)
		w.failing = ""
	}
	w.cfg.Metrics.CountFlightRecord(metrics.RecordWritten)
	if err := w.prune(); err != nil {
		w.cfg.Log.Warn("flight recorder: could not remove old records", "dir", w.cfg.Dir, "err", err)
	}
}

// failure is what err says without the file it names, so that the same
// failure of every record is said once.
func failure(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

func (w *writer) put(name string, data []byte) error {
	tmp := "." + name + ".tmp"
	fh, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, name)
	}
	if err != nil {
		_ = w.root.Remove(tmp)
	}
	return err
}

// prune removes the oldest records (by name, which starts with the time)
// until at most MaxRecords remain, holding at most MaxBytes; the newest is
// kept whatever its size.
func (w *writer) prune() error {
	dir, err := w.root.Open(".")
	if err != nil {
		return err
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return err
	}
	type rec struct {
		name string
		size int64
	}
	var recs []rec
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsRecordName(e.Name()) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		recs = append(recs, rec{e.Name(), info.Size()})
		total += info.Size()
	}
	slices.SortFunc(recs, func(a, b rec) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for len(recs) > 1 && (len(recs) > w.cfg.MaxRecords || total > w.cfg.MaxBytes) {
		if err := w.root.Remove(recs[0].name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		total -= recs[0].size
		recs = recs[1:]
	}
	return errors.Join(errs...)
}
