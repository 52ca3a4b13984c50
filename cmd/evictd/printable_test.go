package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/signals"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"default/web", "default/web"},
		{"usage−request 200.0Mi — skipped: critical pod (static)", "usage−request 200.0Mi — skipped: critical pod (static)"},
		{"web\x1b[2J", `web\x1b[2J`},
		{"a\nb\tc", `a\nb\tc`},
		{"bidi\u202ecba", `bidi\u202ecba`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"del\x7f", `del\x7f`},
	} {
		if got := printable(tc.in); got != tc.want {
			t.Errorf("printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTextf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format string
		args   []any
		want   string
	}{
		{"string", "pod %s\n", []any{"web\x1b[2J"}, "pod web\\x1b[2J\n"},
		{"named string type", "%s\t%s\n", []any{signals.Signal("memory\x1b]0;x\x07"), "ok"}, "memory\\x1b]0;x\\a\tok\n"},
		{"error", "%v\n", []any{errors.New("refused\r\nFAKE LINE")}, "refused\\r\\nFAKE LINE\n"},
		{"bytes", "%s\n", []any{[]byte("body\x1b[1m")}, "body\\x1b[1m\n"},
		{"numbers stay", "%d %d\n", []any{int64(30), int32(-1)}, "30 -1\n"},
		{"printable stays", "%s\n", []any{"kube-system/coredns — skipped"}, "kube-system/coredns — skipped\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			textf(&b, tc.format, tc.args...)
			if got := b.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// hostile is what a tenant or a server could write in a string: a
// terminal's commands (clear screen, set title), a line of its own, and a
// right-to-left override.
const hostile = "x\x1b[2J\x1b]0;owned\x07\r\nFAKE\u202e\u009b"

// fillStrings sets every exported string reachable from v (fields,
// pointers, slices and map keys and values, allocated as needed) to
// hostile, so that a writer's test covers the fields added after it.
func fillStrings(v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() && v.Kind() != reflect.Pointer {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(hostile)
	case reflect.Pointer:
		if v.IsNil() {
			if !v.CanSet() {
				return
			}
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillStrings(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillStrings(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillStrings(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillStrings(k, depth+1)
		fillStrings(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// checkPrintable fails unless every rune of out is printable or a newline,
// and the hostile string appears escaped.
func checkPrintable(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("byte %d of the output is %U, not printable:\n%s", i, r, out)
			return
		}
	}
	if !strings.Contains(out, printable(hostile)) {
		t.Errorf("the output does not quote %q escaped (%s):\n%s", hostile, printable(hostile), out)
	}
}

// TestTextOutputEscapes writes every text output with every string it
// quotes set to a terminal's commands: none may reach the terminal.
func TestTextOutputEscapes(t *testing.T) {
	at := time.Date(2026, 11, 25, 16, 41, 56, 0, time.UTC)
	var st manager.Status
	fillStrings(reflect.ValueOf(&st), 0)
	st.Time = at
	var step stepResult
	fillStrings(reflect.ValueOf(&step), 0)
	for _, tc := range []struct {
		name  string
		write func(w *bytes.Buffer)
	}{
		{"status", func(w *bytes.Buffer) {
			if err := writeStatus(w, &st, at.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}},
		{"status of a pass with a stall signal", func(w *bytes.Buffer) {
			st := st
			st.Observations = []manager.ObservationStatus{{Signal: signals.MemoryPressureFullAvg10, Available: 3550, Capacity: 10000}}
			st.Thresholds = []manager.ThresholdStatus{{Threshold: "memory.pressure.full.avg10>20%" + hostile, Kind: hostile, Observed: true}}
			if err := writeStatus(w, &st, at); err != nil {
				t.Fatal(err)
			}
		}},
		{"simulate step", func(w *bytes.Buffer) { step.write(w) }},
		{"simulate step without stall", func(w *bytes.Buffer) {
			s := step
			s.Observations = []obsResult{{Signal: hostile, Available: 1 << 20, Capacity: 1 << 30}}
			s.write(w)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.write(&b)
			checkPrintable(t, b.String())
		})
	}
}

// TestCommandErrorsEscape checks the error lines that quote what a
// snapshot or a server wrote.
func TestCommandErrorsEscape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, hostile, http.StatusInternalServerError)
	}))
	defer srv.Close()
	snap := filepath.Join(t.TempDir(), "snap.json")
	key, err := json.Marshal(hostile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, []byte(`{"observations": {`+string(key)+`: {"available": 1, "capacity": 2}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"status of a server that answers an error", []string{"status", "--metrics-bind-address", strings.TrimPrefix(srv.URL, "http://")}},
		{"simulate of a snapshot with an unknown signal", []string{"simulate", "--snapshot", snap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error; stdout:\n%s", out)
			}
			checkPrintable(t, errOut)
		})
	}
}
