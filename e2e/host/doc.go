// Package host holds the end-to-end tier of the evictd binary alone on
// this host, with no API server, container runtime or kubelet: systemd's
// notify protocol, socket activation, its port taken, the probes' own
// address answering while the metrics one is flooded, its own user and
// capabilities, this host's memory, filesystem and PID figures, JSON logs
// to the journal, `evictd status` against a running agent, and `make
// install`. Run it with `make e2e-host`; `make test` runs it too.
package host
