package host

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// kubeletProbe asks url as the kubelet's httpGet probe does with its
// default timeout (1 s), on a connection of its own.
func kubeletProbe(url string) (int, time.Duration, error) {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	began := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, time.Since(began), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(began), nil
}

// TestAgentProbesOutliveMetricsFlood runs the agent as evictd.socket does,
// its endpoints on the socket passed, with --healthz-bind-address, which
// it binds itself. Every connection slot of the metrics socket held by
// idle clients (64), and 200 more waiting in its backlog, a probe of the
// metrics socket misses the kubelet's 1 s timeout, while /healthz and
// /readyz on the probes' address answer 200 within it, again and again.
func TestAgentProbesOutliveMetricsFlood(t *testing.T) {
	const slots, backlog = 64, 200
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	socket, health := ln.Addr().String(), testagent.FreeAddr(t)
	cmd, logs := startActivated(t, ln, "", "--metrics-bind-address", socket, "--healthz-bind-address", health, "--root-dir", t.TempDir(),
		"--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=1s")
	testagent.WaitHTTP(t, "http://"+health+"/readyz")
	testagent.WaitHTTP(t, "http://"+socket+"/metrics")

	for range slots + backlog {
		c, err := net.Dial("tcp", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if code, took, err := kubeletProbe("http://" + socket + "/healthz"); err == nil {
		t.Fatalf("/healthz on the metrics socket answered %d after %s with its %d slots held: the slots were not held", code, took, slots)
	}
	for i := range 10 {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, took, err := kubeletProbe("http://" + health + path); err != nil || code != http.StatusOK {
				t.Errorf("probe %d of %s on %s: got %d, %v after %s, want 200 within 1 s", i+1, path, health, code, err, took)
			}
		}
	}
	stopAgent(t, cmd)
	got := logs.String()
	for _, want := range []string{"serving /healthz, /readyz for the probes", "addr=" + health, "socketActivated=true"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}
