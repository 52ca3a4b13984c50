// Package agent assembles one evictd from its configuration: the node's
// signals, the container runtime, the API server's side, the wake-ups, the
// loop and the endpoints. New builds them, Run runs each part's goroutines
// in one errgroup until the context ends or a part fails, Close releases
// what New opened; cmd/evictd is the command line around it, and tests
// drive a whole agent in-process.
package agent
