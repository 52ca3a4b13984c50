// Package thresholds parses, validates and evaluates eviction thresholds with
// the kubelet's syntax, defaults and error texts, and tracks grace periods,
// minimum reclaim and pressure transitions from one pass to the next. It is
// pure: settings, observations and the time of the pass in, decisions out.
package thresholds
