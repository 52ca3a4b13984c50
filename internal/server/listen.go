package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// maxConns bounds the connections New's server serves at once. Prometheus
// scrapes and probes need a few; more wait in the kernel's listen backlog,
// costing evictd no goroutine or buffer, until a served one closes.
// Without the bound, ten thousand idle connections would push evictd past
// its unit's MemoryMax. Whoever reaches the port can hold all 64 with idle
// connections, and a probe then waits behind them: the kubelet's probes
// ask NewProbes' address instead (probes.go), which these cannot crowd out.
const maxConns = 64

// defaultRetry is the schedule of listen attempts while the address cannot
// be bound: 1s doubling to 15s, each delay stretched by up to 100% at
// random, so at most 30s apart and agents restarted together do not retry
// together.
var defaultRetry = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 15 * time.Second}

// Listen binds the address without serving yet, so that the caller (or a
// test using port 0) can learn Addr before Run. It tries once; Run calls
// it if needed, and retries what may pass.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return s.listenError(err)
	}
	s.ln = s.hold(ln)
	return nil
}

// UseListener makes the server serve on ln, a socket already listening
// (the one systemd passes by socket activation), instead of binding its
// address: Run neither binds nor retries. ln is still bounded as a bound
// address would be (maxConns connections for New's server). Call it
// before Run.
func (s *Server) UseListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ln = s.hold(ln)
	s.passed = true
}

// Addr is the address the server is bound to once listening (with the real
// port when the configured one was 0), else the configured address.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.addr
}

// listenRetrying binds the address, retrying on s.retry's schedule while
// the error may pass: a local user who binds evictd's port while evictd
// restarts must not keep it from evicting. It warns once when the first
// attempt fails; Run logs the success, with the attempts it took. It
// returns the listener, or nil if ctx ended first, or the error that
// cannot pass. A listener from UseListener is returned at once, after 0
// attempts.
func (s *Server) listenRetrying(ctx context.Context) (net.Listener, int, error) {
	s.mu.Lock()
	ln, passed := s.ln, s.passed
	s.mu.Unlock()
	if passed {
		return ln, 0, nil
	}
	if err := checkAddr(s.addr); err != nil {
		return nil, 0, s.listenError(err)
	}
	bo := s.retry
	for attempt := 1; ; attempt++ {
		err := s.Listen()
		if err == nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.ln, attempt, nil
		}
		if !mayPass(err) {
			return nil, attempt, err
		}
		delay := bo.Step()
		if attempt == 1 {
			s.log.Warn("cannot listen; retrying in the background, serving nothing until the port is free; evicting as usual",
				"addr", s.addr, "err", err, "retryIn", delay)
		} else {
			s.log.Debug("still cannot listen", "addr", s.addr, "err", err, "attempt", attempt, "retryIn", delay)
		}
		t := s.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			s.log.Info("stopped before the address could be bound", "addr", s.addr, "attempts", attempt)
			return nil, attempt, nil
		case <-t.C():
		}
	}
}

func (s *Server) listenError(err error) error {
	return fmt.Errorf("listen on %s for %s: %w", s.addr, s.purpose, err)
}

// checkAddr refuses an address no retry can bind: one that is not
// host:port, or whose port is neither a number from 0 to 65535 nor a
// known service name. A host name is looked up on each attempt; one that
// does not resolve may yet.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return err
	}
	return nil
}

// mayPass reports whether a listen error may go away by itself: a port
// another process holds (EADDRINUSE), an address not yet on this host
// (EADDRNOTAVAIL), a host name that does not resolve yet. A malformed
// address or port never passes (checkAddr refuses most before the first
// attempt), nor does a permission the process lacks.
func mayPass(err error) bool {
	var addrErr *net.AddrError
	var parseErr *net.ParseError
	switch {
	case errors.As(err, &addrErr), errors.As(err, &parseErr):
		return false
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return false
	}
	return true
}
