// Package manager runs evictd's loop: one goroutine that owns all state,
// woken by the housekeeping ticker or a notifier, and on each pass observes
// the node, evaluates thresholds, ranks pods and decides what to evict.
package manager
