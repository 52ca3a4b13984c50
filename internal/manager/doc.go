// Package manager runs evictd's loop: one goroutine that owns all state,
// woken by the housekeeping ticker or a notifier, and on each pass observes
// the node, asks the decision stage (internal/decide) what to do, and acts
// on it within its limits: reclaim first, one eviction at a time, the
// hourly cap, the wait for evictions in flight. It declares the interfaces
// of the adapters it drives; none of them imports it.
package manager
