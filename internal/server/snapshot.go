package server

import (
	"context"
	"net/http"
	"time"
)

// snapshotTimeout bounds the wait for the loop's snapshot: a pass under
// way may be waiting for an evicted pod to go.
const snapshotTimeout = 20 * time.Second

// HandleSnapshot makes /snapshot answer with take's result as JSON (the
// node as it is now, as `evictd simulate` reads it), behind the same guard
// as /status. Without it, /snapshot answers 404.
func (s *Server) HandleSnapshot(take func(context.Context) (any, error)) {
	s.snapshot.Store(&take)
}

func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	take := s.snapshot.Load()
	if take == nil {
		writeText(w, http.StatusNotFound, "no snapshot available")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), snapshotTimeout)
	defer cancel()
	v, err := (*take)(ctx)
	if err != nil {
		writeText(w, http.StatusServiceUnavailable, "snapshot: "+err.Error())
		return
	}
	s.writeJSON(w, "snapshot", v)
}
