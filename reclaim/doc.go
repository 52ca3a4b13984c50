// Package reclaim frees node-level disk resources through the CRI before
// evictd evicts a pod for a disk signal: dead containers and the sandboxes of
// pods that no longer run, then images no container uses, in the order the
// node's filesystem layout calls for, measuring with statfs what was freed.
//
// The order (Plan) follows the kubelet's buildSignalToNodeReclaimFuncs with
// one deliberate difference: with a dedicated imagefs the kubelet registers
// nothing for nodefs.* (nodefs pressure goes straight to eviction, although
// its docs say dead containers are collected), while evictd removes dead
// containers first, as the kubelet's documentation promises: their logs are
// on nodefs.
package reclaim
