package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// guard bounds how long a test waits for something that should happen at
// once; it only turns a hang into a failure.
const guard = 10 * time.Second

// running is a Server under test, serving on 127.0.0.1:0.
type running struct {
	base   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs s until the test ends (or stop is called).
func start(t *testing.T, s *Server) *running {
	t.Helper()
	if err := s.Listen(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{base: "http://" + s.Addr(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return r
}

// wait returns Run's result once it has returned.
func (r *running) wait() error {
	r.once.Do(func() {
		select {
		case r.err = <-r.done:
		case <-time.After(guard):
			r.err = errors.New("Run did not return")
		}
	})
	return r.err
}

// stop cancels Run's context and returns Run's result.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

func get(t *testing.T, method, url string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", method, url, err)
	}
	return resp.StatusCode, string(body), resp.Header
}

type nodeStatus struct {
	Node      string   `json:"node"`
	Pressures []string `json:"pressures"`
	Threshold string   `json:"threshold,omitempty"`
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.ObservePass(metrics.Pass{Trigger: metrics.TriggerTick})
	m.SetObservation(signals.MemoryAvailable, 512<<20, 16<<30)
	status := func() any {
		return nodeStatus{Node: "node-a", Pressures: []string{"memory"}, Threshold: "memory.available<100Mi"}
	}
	base := start(t, New("127.0.0.1:0", reg, nil, status, slog.New(slog.DiscardHandler))).base

	tests := []struct {
		method, path string
		wantCode     int
		wantType     string
		wantBody     []string
	}{
		{"GET", "/healthz", 200, "text/plain", []string{"ok"}},
		{"HEAD", "/healthz", 200, "text/plain", nil},
		{"GET", "/readyz", 200, "text/plain", []string{"ok"}},
		{"GET", "/metrics", 200, "text/plain", []string{
			`evictd_passes_total{trigger="tick"} 1`,
			`evictd_signal_available{signal="memory.available"} 5.36870912e+08`,
			`promhttp_metric_handler_errors_total{cause="gathering"} 0`,
		}},
		{"GET", "/status", 200, "application/json", []string{`"node": "node-a"`, `"memory"`, `"threshold": "memory.available<100Mi"`}},
		{"POST", "/healthz", 405, "", nil},
		{"DELETE", "/status", 405, "", nil},
		{"GET", "/nope", 404, "", nil},
		{"GET", "/", 200, "text/html", []string{"version unknown", `<a href="metrics">/metrics</a>`, `<a href="status">/status</a>`, `<a href="healthz">/healthz</a>`, `<a href="readyz">/readyz</a>`}},
		{"HEAD", "/", 200, "text/html", nil},
		{"POST", "/", 405, "", nil},
		{"GET", "/index.html", 404, "", nil},
		{"GET", "/metrics/", 404, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, body, h := get(t, tt.method, base+tt.path)
			if code != tt.wantCode {
				t.Errorf("got status %d, want %d (body %q)", code, tt.wantCode, body)
			}
			if ct := h.Get("Content-Type"); tt.wantType != "" && !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("got Content-Type %q, want %s", ct, tt.wantType)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("got body without %q:\n%s", want, body)
				}
			}
		})
	}

	// /status is JSON a client can decode.
	_, body, _ := get(t, "GET", base+"/status")
	var got nodeStatus
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decode /status %q: %v", body, err)
	}
	if got.Node != "node-a" || len(got.Pressures) != 1 || got.Pressures[0] != "memory" {
		t.Errorf("got /status %+v, want node-a with memory pressure", got)
	}
}

// TestIndex checks the landing page's list against what the server
// serves, and that the version is written as text, never as markup.
func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reg      *prometheus.Registry
		status   func() any
		snapshot bool
		want     []string
		wantNot  []string
	}{
		{name: "everything", reg: prometheus.NewRegistry(), status: func() any { return nil }, snapshot: true,
			want: []string{`href="metrics"`, `href="status"`, `href="snapshot"`, `href="healthz"`, `href="readyz"`}},
		{name: "no metrics, status or snapshot", want: []string{`href="healthz"`, `href="readyz"`},
			wantNot: []string{`href="metrics"`, `href="status"`, `href="snapshot"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New("127.0.0.1:0", tc.reg, nil, tc.status, slog.New(slog.DiscardHandler))
			s.SetVersion(`v1.2.3 <script>x</script>`)
			if tc.snapshot {
				s.HandleSnapshot(func(context.Context) (any, error) { return nil, nil })
			}
			code, body, h := get(t, "GET", start(t, s).base+"/")
			if code != http.StatusOK || h.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("got %d, nosniff %q; want 200 and nosniff", code, h.Get("X-Content-Type-Options"))
			}
			if !strings.Contains(body, "version v1.2.3 &lt;script&gt;x&lt;/script&gt;.") {
				t.Errorf("the version is not written escaped:\n%s", body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("no %s:\n%s", w, body)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(body, w) {
					t.Errorf("lists %s, which it does not serve:\n%s", w, body)
				}
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	var readyErr atomic.Pointer[error]
	setReady := func(err error) { readyErr.Store(&err) }
	setReady(errors.New("no complete pass yet"))
	ready := func() error { return *readyErr.Load() }
	base := start(t, New("127.0.0.1:0", prometheus.NewRegistry(), ready, nil, nil)).base

	steps := []struct {
		name     string
		err      error
		wantCode int
		wantBody string
	}{
		{"before the first pass", errors.New("no complete pass yet"), 503, "not ready: no complete pass yet"},
		{"after the first pass", nil, 200, "ok"},
		{"last pass too old", errors.New("last complete pass 45s ago, limit 30s"), 503, "not ready: last complete pass 45s ago, limit 30s"},
		{"recovered", nil, 200, "ok"},
	}
	for _, st := range steps {
		setReady(st.err)
		code, body, _ := get(t, "GET", base+"/readyz")
		if code != st.wantCode || strings.TrimSpace(body) != st.wantBody {
			t.Errorf("%s: got %d %q, want %d %q", st.name, code, strings.TrimSpace(body), st.wantCode, st.wantBody)
		}
		// Liveness does not depend on readiness.
		if code, _, _ := get(t, "GET", base+"/healthz"); code != 200 {
			t.Errorf("%s: got /healthz %d, want 200", st.name, code)
		}
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   func() any
		wantCode int
		wantBody string
	}{
		{"no status func", nil, 404, "no status available"},
		{"not encodable", func() any { return map[string]any{"ch": make(chan int)} }, 500, "encode status: json: unsupported type: chan int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := start(t, New("127.0.0.1:0", prometheus.NewRegistry(), nil, tt.status, nil)).base
			code, body, _ := get(t, "GET", base+"/status")
			if code != tt.wantCode || strings.TrimSpace(body) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", code, strings.TrimSpace(body), tt.wantCode, tt.wantBody)
			}
		})
	}
}

// failingCollector always fails to collect, like a broken custom collector.
type failingCollector struct{ desc *prometheus.Desc }

func (f failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("read broken source"))
}

func TestMetricsSurviveCollectorErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.ObservePass(metrics.Pass{Trigger: metrics.TriggerWake})
	reg.MustRegister(failingCollector{prometheus.NewDesc("evictd_broken", "A collector that fails.", nil, nil)})
	base := start(t, New("127.0.0.1:0", reg, nil, nil, nil)).base

	code, body, _ := get(t, "GET", base+"/metrics")
	if code != 200 || !strings.Contains(body, `evictd_passes_total{trigger="wake"} 1`) {
		t.Fatalf("got %d without the healthy metrics, want 200 with them:\n%s", code, body)
	}
	// The error is counted after the gather that found it, so the second
	// scrape shows the first one's.
	_, body, _ = get(t, "GET", base+"/metrics")
	if want := `promhttp_metric_handler_errors_total{cause="gathering"} 1`; !strings.Contains(body, want) {
		t.Errorf("got body without %q:\n%s", want, body)
	}
}

// gateCollector blocks its Collect until open is closed.
type gateCollector struct {
	desc *prometheus.Desc
	open chan struct{}
}

func (g *gateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }
func (g *gateCollector) Collect(ch chan<- prometheus.Metric) {
	<-g.open
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, 1)
}

// syncBuffer is a strings.Builder a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A scrape whose scraper has gone fails every metric family still to be
// encoded; that is one log line, and the errors are counted.
func TestMetricsScraperGoneLogsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	gate := &gateCollector{desc: prometheus.NewDesc("evictd_test_gate", "Holds the gather.", nil, nil), open: make(chan struct{})}
	reg.MustRegister(gate)
	var logs syncBuffer
	s := New("127.0.0.1:0", nil, nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	h := s.metricsHandler(reg)

	// A whole scrape first, to count the families.
	close(gate.open)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	families := strings.Count(rec.Body.String(), "# TYPE ")
	if rec.Code != http.StatusOK || families < 2 {
		t.Fatalf("first scrape: %d with %d families, want 200 with several", rec.Code, families)
	}

	// The scraper has gone; the gather waits at the gate, so the handler
	// sees that first, then every family fails to encode.
	gate.open = make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/metrics", nil))
	close(gate.open)

	deadline := time.Now().Add(guard)
	for {
		n := encodingErrors(t, reg)
		if n == float64(families) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v encoding errors counted after %s, want %d (one per family)", n, guard, families)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := logs.String()
	if n := strings.Count(got, "serve /metrics"); n != 1 || !strings.Contains(got, "level=WARN") {
		t.Errorf("%d log lines about one scrape of %d failed families, want 1 warning:\n%s", n, families, got)
	}
}

// encodingErrors is promhttp_metric_handler_errors_total{cause="encoding"}.
func encodingErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "promhttp_metric_handler_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == "encoding" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestRunStopsOnCancel(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, nil)
	r := start(t, s)
	if code, _, _ := get(t, "GET", r.base+"/healthz"); code != 200 {
		t.Fatalf("got /healthz %d, want 200", code)
	}
	if err := r.stop(); err != nil {
		t.Errorf("got Run error %v, want nil after cancel", err)
	}
	if conn, err := net.Dial("tcp", s.Addr()); err == nil {
		conn.Close()
		t.Errorf("got a connection to %s after shutdown, want refused", s.Addr())
	}
}

func TestShutdownWaitsForRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	status := func() any {
		close(entered)
		<-release
		return "done"
	}
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, status, nil)
	shuttingDown := make(chan struct{})
	s.srv.RegisterOnShutdown(func() { close(shuttingDown) })
	r := start(t, s)

	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get(r.base + "/status")
		if err != nil {
			res <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		res <- result{resp.StatusCode, string(b)}
	}()
	<-entered
	r.cancel()
	<-shuttingDown
	// Shutdown has begun with the request in flight: a graceful one lets
	// it finish, a hard close would fail it.
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v while a request was in flight, want it to wait", err)
	default:
	}
	close(release)
	got := <-res
	if got.code != 200 || strings.TrimSpace(got.body) != `"done"` {
		t.Errorf("got in-flight request %d %q, want 200 \"done\"", got.code, got.body)
	}
	if err := r.wait(); err != nil {
		t.Errorf("got Run error %v, want nil", err)
	}
}
