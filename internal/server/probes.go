package server

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// The probes' own listener (--healthz-bind-address), and why it is built
// so.
//
// The kubelet's liveness and readiness probes must not share the bounded
// connections of /metrics: whoever reaches that port (a local user, a
// hostNetwork pod) can hold all maxConns of them with idle connections,
// the probes then wait in the backlog past their timeout, and the kubelet
// restarts evictd again and again. So the probes ask an address of their
// own on the node's loopback, with the kubelet's httpGet probe, as they
// ask the kubelet's own (127.0.0.1:10248) and kube-proxy's
// (--healthz-bind-address): nothing new for the kubelet or the operator,
// no process started in the container every period as an exec probe
// would, no socket file to share with the pod. It answers /healthz and
// /readyz only, plain HTTP without a token whatever --metrics-tls-* and
// --metrics-bearer-token-file say (they tell nothing but whether evictd
// runs and has finished a pass, and the probes keep scheme HTTP), with
// tiny answers and no keep-alive (the kubelet's prober opens a connection
// for each probe).
//
// A bound with a backlog behind it, as New's, would not do here: an
// attacker holding its few slots idle would starve the probes the same
// way. Instead every connection is accepted at once and, at probeConns
// held, accepting one more closes the oldest (newestWins). The kubelet
// writes its request as soon as it is connected, and it is answered in
// microseconds; connections held idle, or fed a byte at a time, are
// closed by the next one to arrive, the probe's own. Memory stays bounded:
// probeConns connections at most, each a goroutine and its two 4 KiB
// buffers, and a request must arrive within probeReadTimeout anyway.
//
// What a local attacker can still do: make a probe fail by opening
// connections faster than evictd accepts them, tens of thousands a
// second, so that the full listen backlog has the kernel drop the probe's
// SYN, or probeConns new ones arrive between the probe's accept and its
// answer. That burns CPU cores for as long as it lasts, shows in the
// node's load, and fails the kubelet's own healthz probe alike. Or bind
// the port while no evictd holds it (between a pod's exit and its
// successor's start): evictd retries it in the background, and the
// kubelet's probes ask the taker meanwhile.
//
// It is not socket-activated: the DaemonSet needs it, and there the
// kubelet probes; under systemd the unit's watchdog, fed by the loop
// itself, tells whether evictd is alive, and evictd.socket passes the
// metrics address alone.

// probeConns bounds the connections the probes' server holds at once: a
// probe needs one, the kubelet runs two (liveness and readiness).
const probeConns = 16

// Timeouts of the probes' server: the kubelet's default probe timeout
// is 1 s, so a request slower than these is one no probe waits for.
const (
	// probeReadTimeout bounds the reading of a request, headers and
	// all; probeWriteTimeout its answer.
	probeReadTimeout  = 2 * time.Second
	probeWriteTimeout = 2 * time.Second
	// probeMaxHeaderBytes bounds a request's headers (the kubelet's are
	// about 150 bytes).
	probeMaxHeaderBytes = 4 << 10
)

// NewProbes builds the server of the probes alone for addr (host:port;
// port 0 picks a free port): /healthz, and /readyz with ready (nil means
// ready; a nil func means always ready), the same answers as New's. It
// holds at most probeConns connections, the newest (newestWins). Listen,
// Run and Addr work as for New's server; Secure is not for it.
func NewProbes(addr string, ready func() error, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		addr: addr, log: log.With("component", "http"), retry: defaultRetry, clock: clock.RealClock{},
		serves: "/healthz, /readyz for the probes", purpose: "the probes' /healthz and /readyz",
		hold:  func(ln net.Listener) net.Listener { return newestWins(ln, probeConns) },
		conns: probeConns,
	}
	mux := http.NewServeMux()
	handleHealth(mux, ready)
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: probeReadTimeout,
		ReadTimeout:       probeReadTimeout,
		WriteTimeout:      probeWriteTimeout,
		MaxHeaderBytes:    probeMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.srv.SetKeepAlivesEnabled(false)
	return s
}

// newestWins wraps ln so that at most limit of its connections are open at
// once: accepting one more closes the one held longest, and waits until
// the server has let it go (its goroutine ends at once, its read or write
// failing), so that no more than limit goroutines serve at once. Unlike
// netutil.LimitListener it never leaves a connection waiting in the
// backlog behind held ones, only for an evicted one's goroutine to end.
func newestWins(ln net.Listener, limit int) net.Listener {
	return &newestListener{Listener: ln, slots: make(chan struct{}, limit)}
}

type newestListener struct {
	net.Listener
	// slots holds one token for each connection Accept returned that
	// the server has not closed yet.
	slots chan struct{}

	mu   sync.Mutex
	held list.List // of *heldConn not closed nor let go, oldest first
}

func (l *newestListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &heldConn{Conn: c, l: l}
	var oldest *heldConn
	l.mu.Lock()
	if l.held.Len() >= cap(l.slots) {
		oldest = l.held.Remove(l.held.Front()).(*heldConn)
		oldest.elem = nil
	}
	hc.elem = l.held.PushBack(hc)
	l.mu.Unlock()
	if oldest != nil {
		// Its goroutine's read or write fails, and the server closes it,
		// which frees its slot.
		_ = oldest.Conn.Close()
	}
	l.slots <- struct{}{}
	return hc, nil
}

// heldConn is a connection newestListener returned, until the server
// closes it.
type heldConn struct {
	net.Conn
	l      *newestListener
	elem   *list.Element // in l.held; nil once closed or let go
	closed bool
}

func (c *heldConn) Close() error {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.held.Remove(c.elem)
		c.elem = nil
	}
	first := !c.closed
	c.closed = true
	c.l.mu.Unlock()
	if first {
		<-c.l.slots
	}
	return c.Conn.Close()
}
