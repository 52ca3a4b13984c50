// Package metrics defines evictd's Prometheus metrics (all named evictd_*) on
// a registry the caller owns, and the methods the loop calls to update them.
package metrics
