// Package snapshot reads the JSON node snapshots that `evictd simulate`
// replays: observations, pods with their requests and usage, and optionally
// a sequence of timed steps. The format is documented in docs/SNAPSHOT.md.
package snapshot
