// Package hosttree writes the files a node's signals are read from, a /proc
// tree and a cgroup v1 tree (cgroupfs driver) with one cgroup per pod, into
// a directory, for the agent and its sources to read in place of the host's
// (--proc-root, --cgroup-mount); and rewrites the memory files to put the
// node under pressure and take it off again.
package hosttree
