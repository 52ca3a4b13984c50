// Package recorder is evictd's flight recorder: it keeps the observations
// of the last passes and, for every decision to evict, writes a record on
// the node (a snapshot `evictd simulate` replays, with the decision and
// what became of it) for `evictd explain` (docs/SNAPSHOT.md).
package recorder
