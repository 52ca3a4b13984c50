package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// Timeouts of the HTTP server. A scrape of evictd's few hundred series takes
// milliseconds; the limits only stop a stuck or slow client from holding a
// connection (and a goroutine) of a process that must stay small. With at
// most maxConns connections they also bound how long idle clients hold the
// slots a probe waits for: a connection that sends no request is closed
// after readHeaderTimeout, an idle keep-alive one after idleTimeout.
const (
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	// metricsTimeout bounds one gather; it answers 503 rather than hang.
	metricsTimeout = 10 * time.Second
	// shutdownTimeout bounds the graceful shutdown after ctx is done; open
	// connections are closed after it.
	shutdownTimeout = 5 * time.Second
)

// Server serves evictd's endpoints on one address: New's landing page at
// /, /metrics, /healthz, /readyz and /status, or NewProbes' /healthz and
// /readyz alone.
type Server struct {
	addr string
	log  *slog.Logger
	srv  *http.Server

	// serves names the endpoints in the log, purpose in listen errors;
	// hold bounds the connections of the listener bound or passed, to
	// conns at once.
	serves, purpose string
	hold            func(net.Listener) net.Listener
	conns           int

	tokenSum *reloading[[]byte] // SHA-256 of the bearer token /metrics and /status ask for; nil: none
	// snapshot answers /snapshot (HandleSnapshot); nil: 404.
	snapshot atomic.Pointer[func(context.Context) (any, error)]
	delegate *delegate // the API server's reviews of other tokens; nil: none
	// version is the build the landing page names (SetVersion);
	// hasMetrics and hasStatus say whether /metrics and /status are
	// served, for its list.
	version               atomic.Pointer[string]
	hasMetrics, hasStatus bool

	// retry is the schedule of listen attempts while the address cannot
	// be bound (defaultRetry); clock times them.
	retry wait.Backoff
	clock clock.Clock

	mu     sync.Mutex
	ln     net.Listener // bound (or passed) and wrapped by hold; nil: not yet
	passed bool         // ln came from UseListener, not from binding addr
}

// New builds a server for addr (host:port; port 0 picks a free port) that
// exports reg on /metrics, answers /readyz with ready (nil means ready; a nil
// func means always ready) and /status with status() as JSON (a nil func
// answers 404). It registers promhttp's own scrape metrics on reg. It serves
// plain HTTP to anyone until Secure says otherwise.
func New(addr string, reg *prometheus.Registry, ready func() error, status func() any, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		addr: addr, log: log.With("component", "http"), retry: defaultRetry, clock: clock.RealClock{},
		serves: "/metrics, /healthz, /readyz, /status, /snapshot and the landing page /", purpose: "metrics and health endpoints",
		hold:       func(ln net.Listener) net.Listener { return netutil.LimitListener(ln, maxConns) },
		conns:      maxConns,
		hasMetrics: reg != nil, hasStatus: status != nil,
	}

	mux := http.NewServeMux()
	// The landing page, at / alone: any other unknown path is a 404.
	mux.Handle("GET /{$}", s.guard(http.HandlerFunc(s.serveIndex)))
	if reg != nil {
		mux.Handle("GET /metrics", s.guard(promhttp.InstrumentMetricHandler(reg, s.metricsHandler(reg))))
	}
	// Also here, not only on NewProbes' address: scrapers and probes
	// configured before there was one ask this address.
	handleHealth(mux, ready)
	mux.Handle("GET /status", s.guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if status == nil {
			writeText(w, http.StatusNotFound, "no status available")
			return
		}
		s.writeJSON(w, "status", status())
	})))

	mux.Handle("GET /snapshot", s.guard(http.HandlerFunc(s.serveSnapshot)))

	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s
}

// Run listens (unless Listen already did) and serves until ctx is done, then
// shuts down gracefully, waiting at most a few seconds for open requests. It
// returns nil after a clean shutdown, or the error that stopped serving.
// A port that is taken, or another listen error that may pass, does not
// stop it: it retries in the background (see listenRetrying) and returns
// nil if ctx ends first. A malformed address is an error at once.
// A Server runs once.
func (s *Server) Run(ctx context.Context) error {
	ln, attempts, err := s.listenRetrying(ctx)
	if err != nil || ln == nil {
		return err
	}
	addr := ln.Addr().String()
	s.mu.Lock()
	passed := s.passed
	s.mu.Unlock()

	serveErr := make(chan error, 1)
	tlsOn := s.srv.TLSConfig != nil
	// Said before the first request can be answered: the listener is
	// bound, so connections already wait in its backlog.
	s.log.Info("serving "+s.serves, "addr", addr, "tls", tlsOn, "bearerToken", s.tokenSum != nil, "delegatedAuth", s.delegate != nil,
		"maxConnections", s.conns, "socketActivated", passed, "listenAttempts", attempts)
	if tlsOn {
		// The certificate comes from TLSConfig.GetCertificate: no
		// file names.
		go func() { serveErr <- s.srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- s.srv.Serve(ln) }()
	}

	select {
	case err := <-serveErr:
		// Serve never returns nil; ErrServerClosed only after Shutdown,
		// which nothing else calls.
		return fmt.Errorf("serve http on %s: %w", addr, err)
	case <-ctx.Done():
	}

	// ctx is already done: shut down on a fresh deadline.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		// Requests still running after the deadline: cut them off.
		err = errors.Join(err, s.srv.Close())
		return fmt.Errorf("shut down http server on %s: %w", addr, err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http on %s: %w", addr, err)
	}
	s.log.Info("http server stopped", "addr", addr)
	return nil
}

// handleHealth answers GET /healthz with 200 while evictd runs, and GET
// /readyz with 200 while ready() (nil: always) returns nil, else 503 with
// its error.
func handleHealth(mux *http.ServeMux, ready func() error) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
				return
			}
		}
		writeText(w, http.StatusOK, "ok")
	})
}

// writeJSON answers v as indented JSON, or 500 when it cannot be
// encoded. Thresholds hold < and >: written as they are, not as \u003c.
func (s *Server) writeJSON(w http.ResponseWriter, what string, v any) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.log.Error("encode /"+what, "err", err)
		writeText(w, http.StatusInternalServerError, "encode "+what+": "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = body.WriteTo(w)
}

// writeText writes a plain-text body with its status code.
func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}

// metricsHandler serves one scrape of reg. A collector that fails must not
// blank every other metric: promhttp serves what was gathered and counts
// the error in promhttp_metric_handler_errors_total. Its errors are logged
// once per scrape, not once per metric family: a scrape whose scraper hung
// up, or that ran out of metricsTimeout, fails every family still to be
// encoded with the same error.
func (s *Server) metricsHandler(reg *prometheus.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      &scrapeErrors{log: s.log, req: r},
			Registry:      reg,
			Timeout:       metricsTimeout,
		}).ServeHTTP(w, r)
	})
}

// scrapeErrors is promhttp's error logger for one scrape: it logs the
// first error and drops the rest, which promhttp counts. promhttp may call
// it after its handler has returned (its timeout handler leaves the
// encoding goroutine behind), hence the once.
type scrapeErrors struct {
	log  *slog.Logger
	req  *http.Request
	once sync.Once
}

func (e *scrapeErrors) Println(v ...any) {
	e.once.Do(func() {
		msg := strings.TrimSuffix(fmt.Sprintln(v...), "\n")
		if e.req.Context().Err() != nil {
			e.log.Warn("serve /metrics: the scraper went away or the scrape timed out; later errors of this scrape are only counted",
				"remote", e.req.RemoteAddr, "err", msg)
			return
		}
		e.log.Error("serve /metrics; later errors of this scrape are only counted", "remote", e.req.RemoteAddr, "err", msg)
	})
}
