// Package signals names what evictd observes on a node (memory, allocatable
// memory, filesystems, inodes, PIDs) and holds the plain values observations
// are made of; the readers of this host's files live in signals/host.
package signals
