// Package thresholds parses, validates and evaluates eviction thresholds with
// the kubelet's syntax, defaults and error texts, and tracks grace periods,
// minimum reclaim and pressure transitions from one pass to the next. It is
// pure: settings, observations and the time of the pass in, decisions out.
//
// Deliberate differences from the kubelet, each to keep a bad setting or a
// bad reading from evicting pods:
//
//   - A soft threshold with a 0s grace period is accepted and acts as hard
//     (as in the kubelet), but Parse says so in a Note.
//   - "NaN%" is rejected (the kubelet accepts it as a threshold that is
//     never met); so are NaN and infinite minimum-reclaim percentages.
//   - Errors name the setting they are about, and maps are checked in
//     sorted key order, so the same input always gives the same error.
//   - An allocatableMemory.available threshold set by the operator replaces
//     the one enforce-node-allocatable=pods would derive, instead of both
//     being evaluated.
//   - DeriveContainerFs adds no containerfs threshold when its source is
//     unset (the kubelet adds one with an empty operator).
//   - Thresholds are sorted memory, disk, PIDs by a strict weak ordering.
//   - An observation with a zero time is never fresh, an observation time
//     is compared with the last one seen for its signal even across passes
//     where the signal was missing, and an optional maximum age also makes
//     old observations stale.
//   - Quantities saturate at the int64 bounds instead of wrapping.
//   - A pressure is active on any pass where one of its thresholds is met,
//     even with a zero transition period.
//   - The memory pressure stall signals (memory.pressure.{some,full}.avg10,
//     avg60, avg300), which the kubelet lacks, take thresholds written
//     "signal>percent" (Operator GreaterThan): met while the stall is above
//     a percentage in (0, 100) given with at most two decimals, "%"
//     optional. ">" is rejected for every other signal, "<" for these, and
//     so is a minimum reclaim for them.
package thresholds
