package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
func TestListenRetriesTakenPort(t *testing.T) {
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
func TestListenStopsWhileWaitingForPort(t *testing.T) {
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

// raiseNoFile makes room for need open files, or skips the test.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur >= need {
		return
	}
	lim := syscall.Rlimit{Cur: need, Max: max(old.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d open files; RLIMIT_NOFILE is %d (hard %d) and cannot be raised: %v", need, old.Cur, old.Max, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// idleSockets are TCP connections opened with bare system calls, so that
// the client side costs the test's heap nothing.
type idleSockets struct{ fds []int }

// dialIdle starts n non-blocking connections to addr that never send a
// byte. Those the listen backlog has no room for keep retrying their SYN
// in the kernel.
func dialIdle(t *testing.T, addr string, n int) *idleSockets {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	s := &idleSockets{fds: make([]int, 0, n)}
	t.Cleanup(s.close)
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("socket %d: %v", len(s.fds)+1, err)
		}
		s.fds = append(s.fds, fd)
		if err := syscall.Connect(fd, sa); err != nil && err != syscall.EINPROGRESS {
			t.Fatalf("connect %d to %s: %v", len(s.fds), addr, err)
		}
	}
	return s
}

func (s *idleSockets) close() {
	for _, fd := range s.fds {
		_ = syscall.Close(fd)
	}
	s.fds = nil
}

// acceptQueue is how many connections wait in the kernel's accept queue of
// the IPv4 listener on port, from /proc/net/tcp (rx_queue of a LISTEN
// socket).
func acceptQueue(t *testing.T, port uint16) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	local := fmt.Sprintf(":%04X", port)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st tx_queue:rx_queue ...
		if len(fields) < 5 || !strings.HasSuffix(fields[1], local) || fields[3] != "0A" {
			continue
		}
		_, rx, _ := strings.Cut(fields[4], ":")
		n, err := strconv.ParseInt(rx, 16, 64)
		if err != nil {
			t.Fatalf("/proc/net/tcp %q: %v", sc.Text(), err)
		}
		return int(n)
	}
	t.Fatalf("no listener on port %d in /proc/net/tcp", port)
	return 0
}

func heapInuse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// connCounter counts the connections the server holds, and the most at once.
type connCounter struct{ open, most atomic.Int64 }

func (c *connCounter) hook(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		n := c.open.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// 5,000 idle connections: the server holds maxConns of them, the rest
// wait in the kernel's backlog, so evictd's heap and goroutines barely
// grow; when the flood ends, /healthz answers at once.
func TestServeIdleConnectionsInBacklog(t *testing.T) {
	const idle = 5000
	raiseNoFile(t, idle+maxConns+256)
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, nil)
	var conns connCounter
	s.srv.ConnState = conns.hook
	r := start(t, s)
	port := netip.MustParseAddrPort(s.Addr()).Port()

	heapBefore, goroutinesBefore := heapInuse(), runtime.NumGoroutine()
	flood := dialIdle(t, s.Addr(), idle)
	waitFor(t, "the server to hold its limit of connections", func() bool { return conns.open.Load() == maxConns }, r.done)
	queued := acceptQueue(t, port)
	heapAfter, goroutinesAfter := heapInuse(), runtime.NumGoroutine()

	somaxconn := 128
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		somaxconn, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	t.Logf("%d idle connections: server holds %d (most %d), %d in the accept queue (somaxconn %d); heap in use %+d KiB, goroutines %+d",
		idle, conns.open.Load(), conns.most.Load(), queued, somaxconn, (heapAfter-heapBefore)>>10, goroutinesAfter-goroutinesBefore)
	if most := conns.most.Load(); most != maxConns {
		t.Errorf("got at most %d connections held at once, want the limit %d", most, maxConns)
	}
	if want := min(idle-maxConns, somaxconn) * 9 / 10; queued < want {
		t.Errorf("got %d connections in the accept queue, want at least %d waiting there", queued, want)
	}
	if grew, limit := heapAfter-heapBefore, int64(4<<20); grew > limit {
		t.Errorf("heap in use grew by %d KiB with %d idle connections, want less than %d KiB", grew>>10, idle, limit>>10)
	}
	if grew := goroutinesAfter - goroutinesBefore; grew > maxConns+8 {
		t.Errorf("got %d more goroutines with %d idle connections, want at most %d", grew, idle, maxConns+8)
	}

	// The flood ends: the server drains the queue of closed connections and
	// the probe gets through, no restart needed.
	flood.close()
	healthz(t, r.base, r.done)
}

// Clients that hold every slot with idle keep-alive connections hold it
// only until IdleTimeout: the server closes them, and a probe waiting in
// the backlog meanwhile is answered.
func TestServeIdleKeepAlivesMakeWayForProbe(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, nil)
	s.srv.IdleTimeout = 300 * time.Millisecond
	// firstClosed is when the server first closed an idle keep-alive
	// connection (unix nanoseconds; 0: not yet). The probe's own
	// connection is never idle: it asks for no keep-alive.
	var firstClosed atomic.Int64
	var idle sync.Map // net.Conn → true once idle
	var conns connCounter
	s.srv.ConnState = func(c net.Conn, st http.ConnState) {
		conns.hook(c, st)
		switch st {
		case http.StateIdle:
			idle.Store(c, true)
		case http.StateClosed:
			if _, wasIdle := idle.Load(c); wasIdle {
				firstClosed.CompareAndSwap(0, time.Now().UnixNano())
			}
		}
	}
	r := start(t, s)

	// maxConns clients each make a request and keep the connection, idle.
	hogs := make([]net.Conn, maxConns)
	for i := range hogs {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: evictd\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keep-alive client %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hogs[i] = c
	}
	if n := conns.open.Load(); n != maxConns || firstClosed.Load() != 0 {
		t.Fatalf("got %d connections held and one closed at %d, want %d held, none closed", n, firstClosed.Load(), maxConns)
	}

	healthz(t, r.base, r.done)
	answered := time.Now()
	if fc := firstClosed.Load(); fc == 0 || answered.Before(time.Unix(0, fc)) {
		t.Errorf("the probe was answered before the server closed any idle connection (first at %d): the limit did not hold", fc)
	}
	// The server closed the idle ones: their clients read EOF.
	for i, c := range hogs {
		_ = c.SetReadDeadline(time.Now().Add(guard))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("keep-alive client %d: got %d bytes, %v, want EOF from the idle timeout", i, n, err)
		}
	}
}

// A listener passed by systemd (UseListener) is served as it is, whatever
// the configured address, with no bind and no retry, and still holds at
// most maxConns connections.
func TestServeOnPassedListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	// An address that could never be bound: only the passed listener
	// can serve.
	s := New("127.0.0.1:notaport", prometheus.NewRegistry(), nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	var conns connCounter
	s.srv.ConnState = conns.hook
	s.UseListener(ln)
	if got, want := s.Addr(), ln.Addr().String(); got != want {
		t.Errorf("got Addr %s, want the passed listener's %s", got, want)
	}
	r := start(t, s)
	healthz(t, r.base, r.done)
	got := logs.String()
	if !strings.Contains(got, "socketActivated=true") || !strings.Contains(got, "listenAttempts=0") || !strings.Contains(got, "addr="+ln.Addr().String()) {
		t.Errorf("want the serving line to say the socket was passed, with its address and no listen attempt:\n%s", got)
	}

	flood := dialIdle(t, ln.Addr().String(), maxConns+16)
	waitFor(t, "the server to hold its limit of connections", func() bool { return conns.open.Load() == maxConns }, r.done)
	if most := conns.most.Load(); most != maxConns {
		t.Errorf("got at most %d connections held at once, want the limit %d", most, maxConns)
	}
	flood.close()
	healthz(t, r.base, r.done)
}
