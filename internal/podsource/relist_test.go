package podsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// stallingProxy passes requests to the API server; once stalled, it ends
// every watch it is passing (cleanly, as a watch's timeout ends it) and
// holds each new watch that resumes from a resource version open without
// a byte (a watch stuck after an outage), while lists and watches that
// list (sendInitialEvents) pass.
type stallingProxy struct {
	upstream *url.URL
	rt       http.RoundTripper
	proxy    *httputil.ReverseProxy
	stalled  atomic.Bool
	mu       sync.Mutex
	cut      map[*http.Request]chan struct{}
}

func (p *stallingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		p.proxy.ServeHTTP(w, r)
		return
	}
	if p.stalled.Load() && q.Get("sendInitialEvents") != "true" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	cut := make(chan struct{})
	p.mu.Lock()
	p.cut[r] = cut
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.cut, r)
		p.mu.Unlock()
	}()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = p.upstream.Scheme, p.upstream.Host, p.upstream.Host
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush()
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := resp.Body.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-cut:
					return
				case <-r.Context().Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case b, ok := <-chunks:
			if !ok {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		case <-cut:
			return // a clean end of the stream, as a watch's timeout
		case <-r.Context().Done():
			return
		}
	}
}

// stall ends the watches passing now; the reflector's next watch, resumed
// from its resource version, stalls.
func (p *stallingProxy) stall() {
	p.stalled.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for r, cut := range p.cut {
		close(cut)
		delete(p.cut, r)
	}
}

// TestSourceRelistsAStaleWatch: the watch of the node's pods is stuck
// (open, silent: no event, no bookmark) while the API server answers
// evictd otherwise. A pod created meanwhile is not in the cache until the
// Source finds the watch silent for longer than its bound and relists; a
// relist asked for (the loop does when the API server says a cached pod is
// gone) brings the cache up to date at once.
func TestSourceRelistsAStaleWatch(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: thisNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := c.EvictdNodeToken(ctx, thisNode)
	if err != nil {
		t.Fatal(err)
	}

	// The proxy trusts the cluster's CA; evictd's client reaches the proxy.
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	target, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	p := &stallingProxy{upstream: target, rt: rt, proxy: rp, cut: map[*http.Request]chan struct{}{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	client, err := kubeclient.NewForConfigAsNode(&rest.Config{Host: srv.URL, BearerToken: token}, thisNode)
	if err != nil {
		t.Fatal(err)
	}

	src := New(client, thisNode, 0, slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	src.maxSilence = 3 * time.Second
	relisted := make(chan struct{}, 8)
	var answering atomic.Bool // whether the API server answers evictd otherwise
	answering.Store(true)
	src.SetStaleness(func() time.Time {
		if answering.Load() {
			return time.Now()
		}
		return time.Time{}
	}, func() { relisted <- struct{}{} })
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	has := func(name string) bool {
		_, ok := src.CachedPod("default", name)
		return ok
	}
	create := func(name string) {
		t.Helper()
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: thisNode, Containers: []v1.Container{{Name: "c", Image: "example.invalid/none"}}}}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, within, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: not within %s", what, within)
		}
		return time.Since(start)
	}

	// A working watch brings a new pod at once.
	create("before")
	waitFor("the pod created before the stall in the cache", 10*time.Second, func() bool { return has("before") })

	// The watch stalls: a pod created now does not come through it...
	p.stall()
	create("during")
	time.Sleep(time.Second)
	if has("during") {
		t.Fatal("the pod created during the stall reached the cache through a stalled watch: the test proves nothing")
	}
	// ...until the Source finds its watch silent and relists.
	took := waitFor("the pod created during the stall in the cache", 30*time.Second, func() bool { return has("during") })
	t.Logf("silent watch relisted; the pod reached the cache %s after the stall (bound %s)", took.Round(100*time.Millisecond), src.maxSilence)
	select {
	case <-relisted:
	default:
		t.Error("the relist did not call onRelisted")
	}
	if src.Relists() < 1 {
		t.Errorf("Relists() = %d, want at least 1", src.Relists())
	}

	// Without waiting for the bound: a relist asked for.
	answering.Store(false) // a silent watch is not taken for stale now
	// The new cache's watch brings an event before it is cut: a watch cut
	// with none, within a second, is one client-go's reflector takes for
	// an error and answers with a new list, which the proxy lets through.
	create("between")
	waitFor("a pod through the new cache's watch", 10*time.Second, func() bool { return has("between") })
	p.stall()
	create("asked")
	time.Sleep(time.Second)
	if has("asked") {
		t.Fatal("the pod created during the second stall reached the cache through a stalled watch")
	}
	before := src.Relists()
	src.Relist("the test asks")
	waitFor("the pod created during the second stall in the cache", 30*time.Second, func() bool { return has("asked") })
	if src.Relists() != before+1 {
		t.Errorf("Relists() = %d, want %d", src.Relists(), before+1)
	}
}
