package systemd

import (
	"fmt"
	"net"

	"github.com/coreos/go-systemd/v22/activation"
)

// Listener returns the listening socket systemd passed to evictd by socket
// activation (evictd.socket), or nil when none was passed: LISTEN_FDS
// unset, or LISTEN_PID naming another process. It unsets LISTEN_PID,
// LISTEN_FDS and LISTEN_FDNAMES either way, so nothing evictd starts
// inherits them. evictd serves one address: more than one socket, or one
// that is not a listening stream socket, is an error.
func Listener() (net.Listener, error) {
	files := activation.Files(true)
	defer func() {
		// net.FileListener dups the descriptor: the passed one is
		// closed whatever happens.
		for _, f := range files {
			_ = f.Close()
		}
	}()
	switch len(files) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("systemd passed %d sockets (LISTEN_FDS=%d), want one: evictd serves its endpoints on one address", len(files), len(files))
	}
	ln, err := net.FileListener(files[0])
	if err != nil {
		return nil, fmt.Errorf("use the socket systemd passed (fd 3, %s): not a listening stream socket: %w", files[0].Name(), err)
	}
	return ln, nil
}
