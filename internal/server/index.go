package server

import (
	"fmt"
	"html"
	"net/http"
	"strings"
)

// endpoint is one line of the landing page: a path, linked relative to
// the page (so that it still works behind a proxy that serves evictd
// under a path of its own), and what it answers.
type endpoint struct{ path, what string }

// SetVersion sets the version the landing page at / names; "unknown"
// until it is called.
func (s *Server) SetVersion(version string) { s.version.Store(&version) }

// serveIndex answers / with the landing page: the build, and the
// endpoints this server answers. It is behind the same guard as /metrics
// and /status: the version tells more than /healthz does, so only a
// client allowed the metrics reads it. Written with fmt and
// html.EscapeString rather than html/template, which the agent does not
// link (cmd/evictd's TestReleaseBuildLinksNoTemplates).
func (s *Server) serveIndex(w http.ResponseWriter, _ *http.Request) {
	version := "unknown"
	if v := s.version.Load(); v != nil && *v != "" {
		version = *v
	}
	var eps []endpoint
	if s.hasMetrics {
		eps = append(eps, endpoint{"metrics", "Prometheus metrics"})
	}
	if s.hasStatus {
		eps = append(eps, endpoint{"status", "what the last pass saw and decided, as JSON (evictd status)"})
	}
	if s.snapshot.Load() != nil {
		eps = append(eps, endpoint{"snapshot", "the node as it is now, as JSON (evictd status --snapshot)"})
	}
	eps = append(eps,
		endpoint{"healthz", "ok while evictd runs"},
		endpoint{"readyz", "ok once a pass has ended, while the loop is not stuck"})
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>evictd</title></head>\n<body>\n<h1>evictd</h1>\n<p>Node-pressure eviction agent, version %s.</p>\n<ul>\n",
		html.EscapeString(version))
	for _, e := range eps {
		fmt.Fprintf(&b, "<li><a href=\"%s\">/%s</a>: %s</li>\n", e.path, e.path, html.EscapeString(e.what))
	}
	b.WriteString("</ul>\n</body>\n</html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, b.String())
}
