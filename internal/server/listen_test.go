package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitFor polls cond until it holds; it fails the test if Run returns
// meanwhile (done) or if cond does not hold within guard.
func waitFor(t *testing.T, what string, cond func() bool, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, guard)
		}
		time.Sleep(time.Millisecond)
	}
}

// healthz polls GET url/healthz on a fresh connection until it answers 200.
func healthz(t *testing.T, base string, done <-chan error) {
	t.Helper()
	c := &http.Client{Timeout: guard, Transport: &http.Transport{DisableKeepAlives: true}}
	waitFor(t, "200 from /healthz", func() bool {
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, done)
}

// A port another process holds while evictd starts is retried on the
// backoff's schedule: Run does not return (evictd goes on evicting), warns
// once, and serves once the port is free.
func TestRunWaitsForTakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	var logs syncBuffer
	s := New(addr, prometheus.NewRegistry(), nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	fc := clocktesting.NewFakeClock(time.Now())
	s.clock = fc
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	// Each failed attempt leaves Run waiting on a timer; stepping past
	// the longest jittered delay makes it try again.
	const failed = 4
	for i := range failed {
		waitFor(t, fmt.Sprintf("wait after failed attempt %d", i+1), fc.HasWaiters, done)
		if i < failed-1 {
			fc.Step(2 * defaultRetry.Cap)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "level=WARN"); n != 1 || !strings.Contains(got, "serving nothing until the port is free; evicting as usual") ||
		!strings.Contains(got, "address already in use") || !strings.Contains(got, "addr="+addr) {
		t.Errorf("after %d failed attempts: %d warnings, want one saying what evictd does meanwhile, with the address and the error:\n%s", failed, n, got)
	}

	taken.Close()
	fc.Step(2 * defaultRetry.Cap)
	healthz(t, "http://"+addr, done)
	if got := logs.String(); strings.Count(got, "serving /metrics") != 1 || !strings.Contains(got, fmt.Sprintf("listenAttempts=%d", failed+1)) {
		t.Errorf("want one info line on serving after %d attempts:\n%s", failed+1, got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("got Run error %v, want nil after cancel", err)
		}
	case <-time.After(guard):
		t.Fatal("Run did not return after cancel")
	}
}

// Run waiting for a taken port returns nil when its context ends.
func TestRunStopsWhileWaitingForPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s := New(taken.Addr().String(), prometheus.NewRegistry(), nil, nil, nil)
	fc := clocktesting.NewFakeClock(time.Now())
	s.clock = fc
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "a wait for the next attempt", fc.HasWaiters, done)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("got %v, want nil", err)
		}
	case <-time.After(guard):
		t.Fatal("Run did not return after cancel")
	}
}

// An address that can never be bound stops Run at once, naming it; Listen
// (one attempt) names a taken one.
func TestListenErrorNamesAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer taken.Close()
	if err := New(taken.Addr().String(), nil, nil, nil, nil).Listen(); err == nil || !strings.Contains(err.Error(), "listen on "+taken.Addr().String()) {
		t.Errorf("Listen on a taken port: got %v, want an error naming it", err)
	}
	for _, addr := range []string{"127.0.0.1:notaport", "127.0.0.1", "127.0.0.1:70000", "127.0.0.1:-1", "[::1:9847", "127.0.0.1:9847:1"} {
		t.Run(addr, func(t *testing.T) {
			s := New(addr, prometheus.NewRegistry(), nil, nil, nil)
			s.clock = clocktesting.NewFakeClock(time.Now()) // a retry would hang
			err := s.Run(t.Context())
			if err == nil || !strings.Contains(err.Error(), "listen on "+addr) {
				t.Errorf("got %v, want an error naming %s", err, addr)
			}
		})
	}
}
