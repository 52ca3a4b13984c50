package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// probeTimeout is the kubelet's default probe timeout (timeoutSeconds 1):
// an answer later than this fails the probe.
const probeTimeout = time.Second

// probe asks url as the kubelet's httpGet probe does, on a connection of
// its own, and returns the status code and how long the answer took.
func probe(url string) (int, time.Duration, error) {
	c := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	began := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, time.Since(began), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(began), nil
}

// wantProbes checks that /healthz and /readyz at base answer 200 within
// the kubelet's probe timeout, rounds times each.
func wantProbes(t *testing.T, base string, rounds int) {
	t.Helper()
	for i := range rounds {
		for _, path := range []string{"/healthz", "/readyz"} {
			code, took, err := probe(base + path)
			if err != nil || code != http.StatusOK {
				t.Errorf("probe %d of %s: got %d, %v after %s, want 200 within %s", i+1, path, code, err, took, probeTimeout)
			}
		}
	}
}

// Every connection slot of the metrics address held with idle connections,
// and more waiting in its backlog: a probe of the metrics address waits
// past the kubelet's timeout, while /healthz and /readyz on the probes'
// own address answer at once, again and again.
func TestProbesOutliveHeldMetricsSlots(t *testing.T) {
	const backlog = 200
	raiseNoFile(t, maxConns+backlog+256)
	ready := func() error { return nil }
	metrics := New("127.0.0.1:0", prometheus.NewRegistry(), ready, nil, nil)
	var conns connCounter
	metrics.srv.ConnState = conns.hook
	m := start(t, metrics)
	p := start(t, NewProbes("127.0.0.1:0", ready, nil))
	healthz(t, m.base, m.done)
	healthz(t, p.base, p.done)

	dialIdle(t, metrics.Addr(), maxConns+backlog)
	waitFor(t, "the metrics server to hold its limit of connections", func() bool { return conns.open.Load() == maxConns }, m.done)
	port := netip.MustParseAddrPort(metrics.Addr()).Port()
	waitFor(t, "connections waiting in the metrics backlog", func() bool { return acceptQueue(t, port) > 0 }, m.done)

	// What the probes suffered before they had an address of their own.
	if code, took, err := probe(m.base + "/healthz"); err == nil {
		t.Fatalf("/healthz on the metrics address answered %d after %s with every slot held: the slots were not held", code, took)
	}
	wantProbes(t, p.base, 10)
	if n := conns.open.Load(); n != maxConns {
		t.Errorf("got %d connections held by the metrics server after the probes, want still %d", n, maxConns)
	}
}

// The probes' address flooded itself: idle connections by the thousand
// ahead of the probe in the backlog, and others sending a byte of a
// request and nothing more. Each new connection closes the oldest held,
// so the probe's own is answered within the kubelet's timeout; the server
// never holds more than probeConns, and its goroutines stay few.
func TestProbesNewestWins(t *testing.T) {
	const idle = 2000
	raiseNoFile(t, idle+probeConns+256)
	s := NewProbes("127.0.0.1:0", nil, nil)
	var conns connCounter
	s.srv.ConnState = conns.hook
	r := start(t, s)
	healthz(t, r.base, r.done)
	goroutinesBefore := runtime.NumGoroutine()

	// The probe's connection comes after the whole flood, in the backlog
	// behind it.
	dialIdle(t, s.Addr(), idle)
	wantProbes(t, r.base, 5)
	// The oldest connection is closed when the newest is accepted, but the
	// server's goroutine for it reports it closed a moment later: wait for
	// that, not for a count taken in between.
	waitFor(t, "the server to hold at most probeConns connections", func() bool { return conns.open.Load() <= probeConns }, r.done)
	port := netip.MustParseAddrPort(s.Addr()).Port()
	if q := acceptQueue(t, port); q != 0 {
		t.Errorf("after the probes: %d connections in the backlog, want none waiting", q)
	}

	// probeConns slow clients, each a byte into its request: the next
	// connection closes the first of them, long before its read timeout.
	slow := make([]net.Conn, probeConns)
	for i := range slow {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "G"); err != nil {
			t.Fatal(err)
		}
		slow[i] = c
	}
	waitFor(t, "the slow clients to be held", func() bool { return conns.open.Load() == probeConns }, r.done)
	wantProbes(t, r.base, 1)
	_ = slow[0].SetReadDeadline(time.Now().Add(probeReadTimeout / 2))
	if n, err := slow[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("the oldest slow client: got %d bytes, %v, want its connection closed by the probe's", n, err)
	}

	if most := conns.most.Load(); most > probeConns+1 {
		t.Errorf("got at most %d connections held at once, want %d (and one being let go)", most, probeConns)
	}
	if grew := runtime.NumGoroutine() - goroutinesBefore; grew > probeConns+8 {
		t.Errorf("got %d more goroutines after %d connections, want at most %d", grew, idle, probeConns+8)
	}
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// The probes' server answers /healthz and /readyz as New's does, readiness
// with the reason it is not ready, and nothing else: no metrics, no status.
func TestProbesServeHealthAlone(t *testing.T) {
	notReady := errors.New("no pass yet")
	s := NewProbes("127.0.0.1:0", func() error { return notReady }, nil)
	r := start(t, s)
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", http.StatusOK, "ok\n"},
		{"/readyz", http.StatusServiceUnavailable, "not ready: no pass yet\n"},
		{"/metrics", http.StatusNotFound, ""},
		{"/status", http.StatusNotFound, ""},
	} {
		resp, err := http.Get(r.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.code || tc.body != "" && string(body) != tc.body {
			t.Errorf("GET %s: got %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.code, tc.body)
		}
		if !resp.Close {
			t.Errorf("GET %s: the server keeps the connection, want it closed after the answer (no keep-alive)", tc.path)
		}
	}
}
