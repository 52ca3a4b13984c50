// Package wakeup wakes evictd's loop as soon as the kernel says memory
// crossed a threshold or stalls, instead of at the next housekeeping tick:
// cgroup v1 memcg threshold notifications, cgroup v2 PSI triggers and
// memory.events, and a fast-poll fallback, each a Source behind one wake
// callback (the manager's Wake, which merges bursts into one pass).
package wakeup
