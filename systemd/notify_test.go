package systemd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// guard bounds every wait for something that should happen within a few
// watchdog periods; it only turns a hang into a failure.
const guard = 5 * time.Second

// watchdogUsec gives a 200ms watchdog, so a ping every 100ms.
const watchdogUsec = "200000"

// notifySocket listens on a unixgram socket, points NOTIFY_SOCKET at it and
// clears the watchdog variables (the test may be run under systemd).
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	// Socket paths are limited to 108 bytes; t.TempDir can be long.
	dir, err := os.MkdirTemp("", "sdnotify")
	if err != nil {
		t.Fatalf("make socket dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return conn
}

// read returns the next datagram, or "" if none arrives within d.
func read(t *testing.T, conn *net.UnixConn, d time.Duration) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ""
	}
	if err != nil {
		t.Fatalf("read notify socket: %v", err)
	}
	return string(buf[:n])
}

func TestNotifications(t *testing.T) {
	conn := notifySocket(t)
	tests := []struct {
		name   string
		notify func() error
		want   string
	}{
		{"Ready", Ready, "READY=1"},
		{"Status", func() error { return Status("watching 7 signals") }, "STATUS=watching 7 signals"},
		{"Status on one line", func() error { return Status("memory pressure\nevicting ns/pod\r\n") }, "STATUS=memory pressure evicting ns/pod "},
		{"Stopping", Stopping, "STOPPING=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.notify(); err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if got := read(t, conn, guard); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNotifyErrorSaysWhat(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "missing.sock"))
	err := Ready()
	if err == nil || !strings.Contains(err.Error(), "notify systemd READY=1") {
		t.Errorf("got %v, want an error saying READY=1 could not be sent", err)
	}
}

// TestNoOps checks that without systemd's variables nothing is sent and
// Watchdog returns at once, and that malformed ones are reported.
func TestNoOps(t *testing.T) {
	tests := []struct {
		name         string
		notifySocket bool
		usec, pid    string
		wantErr      string
	}{
		{"no NOTIFY_SOCKET", false, watchdogUsec, "self", ""},
		{"no WATCHDOG_USEC", true, "", "", ""},
		{"watchdog for another process", true, watchdogUsec, "1", ""},
		{"malformed WATCHDOG_USEC", true, "soon", "", "WATCHDOG_USEC"},
		{"zero WATCHDOG_USEC", true, "0", "", "WATCHDOG_USEC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := notifySocket(t)
			if !tt.notifySocket {
				t.Setenv("NOTIFY_SOCKET", "")
			}
			t.Setenv("WATCHDOG_USEC", tt.usec)
			if tt.pid == "self" {
				tt.pid = strconv.Itoa(os.Getpid())
			}
			t.Setenv("WATCHDOG_PID", tt.pid)
			if !tt.notifySocket {
				for _, f := range []func() error{Ready, Stopping, func() error { return Status("x") }} {
					if err := f(); err != nil {
						t.Errorf("got %v, want nil without NOTIFY_SOCKET", err)
					}
				}
			}

			done := make(chan error, 1)
			go func() { done <- Watchdog(t.Context(), nil, slog.New(slog.DiscardHandler)) }()
			select {
			case err := <-done:
				if tt.wantErr == "" && err != nil {
					t.Errorf("got %v, want nil", err)
				}
				if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Errorf("got %v, want an error naming %s", err, tt.wantErr)
				}
			case <-time.After(guard):
				t.Fatal("Watchdog kept running, want it to return at once")
			}
			if got := read(t, conn, 10*time.Millisecond); got != "" {
				t.Errorf("got %q on the socket, want nothing", got)
			}
		})
	}
}

func watchdogEnv(t *testing.T) *net.UnixConn {
	t.Helper()
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", watchdogUsec)
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	return conn
}

func TestWatchdogPings(t *testing.T) {
	conn := watchdogEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Watchdog(ctx, func() bool { return true }, slog.New(slog.DiscardHandler)) }()

	// One ping at once, then one every 100ms: more than one must arrive
	// within two 200ms watchdog intervals.
	window := time.Now().Add(400 * time.Millisecond)
	pings := 0
	for {
		left := time.Until(window)
		if left <= 0 {
			break
		}
		got := read(t, conn, left)
		if got == "" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("got %q, want WATCHDOG=1", got)
		}
		pings++
	}
	if pings < 2 {
		t.Errorf("got %d pings in two watchdog intervals, want more than one", pings)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("got %v, want nil after cancel", err)
		}
	case <-time.After(guard):
		t.Fatal("Watchdog did not return after cancel")
	}
	// Drain what was sent before it returned; then nothing more comes.
	for read(t, conn, 10*time.Millisecond) != "" {
	}
	if got := read(t, conn, 300*time.Millisecond); got != "" {
		t.Errorf("got %q after Watchdog returned, want nothing", got)
	}
}

// TestWatchdogWithholdsPings runs the watchdog in lockstep with alive: each
// call blocks until the test takes its answer, so the test knows exactly
// which ticks found the loop alive and can check the socket without timing.
func TestWatchdogWithholdsPings(t *testing.T) {
	conn := watchdogEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var healthy atomic.Bool // false: the loop has not completed a pass yet
	calls := make(chan bool)
	alive := func() bool {
		v := healthy.Load()
		select {
		case calls <- v:
		case <-ctx.Done():
		}
		return v
	}
	// next waits for the watchdog's next health check and returns its answer.
	next := func() bool {
		t.Helper()
		select {
		case v := <-calls:
			return v
		case <-time.After(guard):
			t.Fatal("watchdog stopped checking alive")
			return false
		}
	}
	expectPing := func(when string) {
		t.Helper()
		if got := read(t, conn, guard); got != "WATCHDOG=1" {
			t.Fatalf("%s: got %q, want WATCHDOG=1", when, got)
		}
	}

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	done := make(chan error, 1)
	go func() { done <- Watchdog(ctx, alive, log) }()

	// Starting: no ping until the first pass. After the second check,
	// whatever followed the first one is already readable.
	for range 2 {
		if next() {
			t.Fatal("got alive() = true before the first pass, want false")
		}
	}
	if got := read(t, conn, 50*time.Millisecond); got != "" {
		t.Errorf("got %q before the first pass, want nothing", got)
	}
	healthy.Store(true)
	for !next() {
	}
	expectPing("first pass done")
	for i := range 2 {
		if !next() {
			t.Fatal("got alive() = false, want true")
		}
		expectPing("alive, check " + strconv.Itoa(i))
	}

	// The loop gets stuck. A check already under way may still answer
	// true (and ping); from the first false on, nothing is sent.
	healthy.Store(false)
	for next() {
		expectPing("check begun before the loop got stuck")
	}
	if next() {
		t.Fatal("got alive() = true while stuck, want false")
	}
	// Two checks found the loop stuck, and the watchdog is now blocked in
	// the third: anything sent after the first check is already readable.
	if got := read(t, conn, 50*time.Millisecond); got != "" {
		t.Errorf("got %q after two checks found the loop stuck, want nothing", got)
	}

	// The loop recovers: pings resume.
	healthy.Store(true)
	for !next() {
	}
	expectPing("after recovery")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("got %v, want nil after cancel", err)
		}
	case <-time.After(guard):
		t.Fatal("Watchdog did not return after cancel")
	}

	// One line per change of state, at the level it deserves: waiting at
	// start is normal, a stuck loop is an error.
	text := logs.String()
	for _, want := range []struct {
		level, msg string
	}{
		{"INFO", "waiting for the loop's first pass"},
		{"ERROR", "loop not alive; withholding watchdog pings"},
		{"INFO", "loop alive again; resuming watchdog pings"},
	} {
		n := 0
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "level="+want.level) && strings.Contains(line, want.msg) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("got %d %s lines %q, want 1; log:\n%s", n, want.level, want.msg, text)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger in another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
