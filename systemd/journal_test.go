package systemd

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelError + 4, "<3>"},
		{slog.LevelError, "<3>"},
		{slog.LevelWarn + 2, "<4>"},
		{slog.LevelWarn, "<4>"},
		{slog.LevelInfo + 1, "<6>"},
		{slog.LevelInfo, "<6>"},
		{slog.LevelInfo - 1, "<7>"},
		{slog.LevelDebug, "<7>"},
		{slog.LevelDebug - 4, "<7>"},
	} {
		if got := priority(tc.level); got != tc.want {
			t.Errorf("priority(%v): got %q, want %q", tc.level, got, tc.want)
		}
	}
}

// TestJournalHandler checks each line, text or JSON, and through derived
// handlers, starts with its priority and is otherwise what the inner
// handler writes.
func TestJournalHandler(t *testing.T) {
	for _, tc := range []struct {
		name     string
		newInner func(io.Writer) slog.Handler
		want     []string
	}{
		{"text", func(w io.Writer) slog.Handler {
			return slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime})
		}, []string{
			`<7>level=DEBUG msg=d`,
			`<6>level=INFO msg=i component=c`,
			`<4>level=WARN msg=w component=c g.k=v`,
			`<3>level=ERROR msg=e err="a\nb"`,
		}},
		{"json", func(w io.Writer) slog.Handler {
			return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime})
		}, []string{
			`<7>{"level":"DEBUG","msg":"d"}`,
			`<6>{"level":"INFO","msg":"i","component":"c"}`,
			`<4>{"level":"WARN","msg":"w","component":"c","g":{"k":"v"}}`,
			`<3>{"level":"ERROR","msg":"e","err":"a\nb"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(NewJournalHandler(&buf, tc.newInner))
			log.Debug("d")
			c := log.With("component", "c")
			c.Info("i")
			c.WithGroup("g").Warn("w", "k", "v")
			log.Error("e", "err", fmt.Errorf("a\nb"))
			if got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// TestIsJournalStream uses a temporary file as the stream systemd would
// connect: JOURNAL_STREAM naming its device and inode makes it the journal.
func TestIsJournalStream(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(f.Name(), &st); err != nil {
		t.Fatal(err)
	}
	other, err := os.Create(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tc := range []struct {
		name, env string
		file      *os.File
		want      bool
	}{
		{"the stream", fmt.Sprintf("%d:%d", st.Dev, st.Ino), f, true},
		{"another file", fmt.Sprintf("%d:%d", st.Dev, st.Ino), other, false},
		{"other inode", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), f, false},
		{"unset", "", f, false},
		{"garbled", "journal", f, false},
		{"not numbers", "a:b", f, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("JOURNAL_STREAM", tc.env)
			if got := IsJournalStream(tc.file); got != tc.want {
				t.Errorf("JOURNAL_STREAM=%q: got %v, want %v", tc.env, got, tc.want)
			}
		})
	}
}

func TestErrorLines(t *testing.T) {
	var buf bytes.Buffer
	w := ErrorLines(&buf)
	for _, s := range []string{"evictd: unknown flag: --nope\nRun 'evictd --help'", " for usage.\n", "", "a\n\nb\n"} {
		if n, err := io.WriteString(w, s); n != len(s) || err != nil {
			t.Fatalf("write %q: got %d, %v", s, n, err)
		}
	}
	want := "<3>evictd: unknown flag: --nope\n<3>Run 'evictd --help' for usage.\n<3>a\n<3>\n<3>b\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}
