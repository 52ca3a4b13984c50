// Package stallguest proves in the cgroup v2 guest (internal/testing/testvm)
// that a stall is not a shortage: a container held at its own memory.high
// stalls the node's PSI while memory is plentiful, and the evictd binary of
// $EVICTD_BIN, with a stall threshold set, neither evicts nor reports memory
// pressure for it; a real shortage in the same run still makes it evict.
// Its place is the guest tier (e2e/guest, with that package's TestMain and
// allocator) once that tier has landed.
package stallguest
