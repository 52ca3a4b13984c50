package cri

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDialAbsentRuntimeLeaksNothing: dialing a runtime that is not there
// fails at once, naming the endpoint, and leaves no connection (and so no
// goroutine) behind, however often the agent retries.
func TestDialAbsentRuntimeLeaksNothing(t *testing.T) {
	dir := t.TempDir()
	// A socket path with nothing behind it, and one whose listener accepts
	// and hangs up (not a CRI server).
	absent := filepath.Join(dir, "absent.sock")
	before := runtime.NumGoroutine()
	for range 50 {
		_, err := Dial(context.Background(), absent, "", 200*time.Millisecond, nil)
		if err == nil || !strings.Contains(err.Error(), absent) {
			t.Fatalf("Dial(%s): got %v, want an error naming the endpoint", absent, err)
		}
	}
	// Give anything started a moment to show up, then compare.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines: %d before 50 failed dials, %d after", before, after)
	}

	l, err := net.Listen("unix", filepath.Join(dir, "plain.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Dial(context.Background(), l.Addr().String(), "", 300*time.Millisecond, nil); err == nil {
		t.Errorf("Dial to a socket that is not a CRI server: got no error")
	}
}
