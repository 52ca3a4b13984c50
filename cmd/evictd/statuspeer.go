package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Who serves a loopback address, for `evictd status`: a bearer token goes
// over plain HTTP only to a socket that root, the caller or --agent-user
// owns. On loopback no one can read the traffic, but any local user can
// take the agent's port while evictd restarts and collect what is sent
// there.

// untrustedPeerError is the refusal to send the token to addr.
type untrustedPeerError struct {
	addr, reason string
}

func (e *untrustedPeerError) Error() string {
	return "not sending the token to " + e.addr + ": " + e.reason
}

// peerCheck decides which connections may carry the token over plain HTTP.
type peerCheck struct {
	procRoot string
	// trusted are the uids whose sockets may have the token: root, the
	// caller (who can read the token file already) and --agent-user.
	trusted []int
	// wait bounds how long the server end of a new connection may take
	// to appear in procRoot/net/tcp.
	wait time.Duration
}

// guardedTransport is plain HTTP whose every connection is checked first
// (check): loopback, and served by a socket a trusted uid owns. No proxy.
func guardedTransport(check *peerCheck) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := check.conn(conn); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
}

// conn checks conn, a TCP connection just made.
func (c *peerCheck) conn(conn net.Conn) error {
	local, err1 := netip.ParseAddrPort(conn.LocalAddr().String())
	remote, err2 := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err := errors.Join(err1, err2); err != nil {
		return &untrustedPeerError{conn.RemoteAddr().String(), fmt.Sprintf("cannot tell who listens there: %v", err)}
	}
	local, remote = unmap(local), unmap(remote)
	addr := remote.String()
	if !remote.Addr().IsLoopback() {
		return &untrustedPeerError{addr, "it is not a loopback address, and plain HTTP would carry the token over the network; " +
			"give the CA of the agent's --metrics-tls-cert-file with --metrics-ca-file"}
	}
	uid, err := c.serverUID(local, remote)
	if err != nil {
		return &untrustedPeerError{addr, fmt.Sprintf("cannot tell who listens there: %v", err)}
	}
	if slices.Contains(c.trusted, uid) {
		return nil
	}
	holder := ""
	if pids := listenerPIDs(c.procRoot, remote); len(pids) > 0 {
		holder = ", " + strings.Join(pids, ", ")
	}
	return &untrustedPeerError{addr, fmt.Sprintf("the socket listening there belongs to %s%s, not to %s: "+
		"another user's process holds the agent's port. If evictd runs as that user, name it with --agent-user; "+
		"or reach the agent over TLS with --metrics-ca-file", userName(uid), holder, c.trustedNames())}
}

// serverUID finds the server end of the connection from local to remote:
// the socket the listener made for it, which has the listener's owner
// (while it waits to be accepted too, and as a request not yet
// established).
func (c *peerCheck) serverUID(local, remote netip.AddrPort) (int, error) {
	deadline := time.Now().Add(c.wait)
	for {
		var errs []error
		for _, file := range []string{"tcp", "tcp6"} {
			entries, err := readTCP(filepath.Join(c.procRoot, "net", file))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, e := range entries {
				if e.local == remote && e.remote == local {
					return e.uid, nil
				}
			}
		}
		if len(errs) == 2 {
			return 0, errors.Join(errs...)
		}
		// The server's end appears once the kernel has handled the
		// handshake's last ACK, which on loopback is almost always
		// before connect returns.
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no socket in %s/net/tcp or tcp6 serves the connection from %s", c.procRoot, local)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *peerCheck) trustedNames() string {
	names := []string{}
	for _, uid := range c.trusted {
		if n := userName(uid); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, " or ")
}

// userName is "uid 65534 (nobody)", or "uid N" for a user with no name.
func userName(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// lookupUser is a uid given as a number or a user's name.
func lookupUser(s string) (int, error) {
	if uid, err := strconv.Atoi(s); err == nil && uid >= 0 {
		return uid, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

// tcpEntry is a line of /proc/net/tcp or tcp6.
type tcpEntry struct {
	local, remote netip.AddrPort
	state         string // "0A" is LISTEN
	uid           int
	inode         string
}

// readTCP parses /proc/net/tcp or tcp6; IPv4-mapped addresses are
// unmapped.
func readTCP(path string) ([]tcpEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []tcpEntry
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 10 {
			continue
		}
		local, err1 := parseProcAddr(fields[1])
		remote, err2 := parseProcAddr(fields[2])
		uid, err3 := strconv.Atoi(fields[7])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		out = append(out, tcpEntry{local: local, remote: remote, state: fields[3], uid: uid, inode: fields[9]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// parseProcAddr parses "0100007F:9BA7": the address as the kernel holds
// it (network order), printed 32 bits at a time in the machine's order,
// then the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(a)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port of %q: %w", s, err)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return unmap(netip.AddrPortFrom(addr, uint16(port))), nil
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// listenerPIDs names the processes holding the socket that listens on
// addr ("pid 1234 (nc)"), as far as this user may see them: for an error
// message only.
func listenerPIDs(procRoot string, addr netip.AddrPort) []string {
	var inode string
	for _, file := range []string{"tcp", "tcp6"} {
		entries, _ := readTCP(filepath.Join(procRoot, "net", file))
		for _, e := range entries {
			if e.state == "0A" && e.local.Port() == addr.Port() && (e.local.Addr() == addr.Addr() || e.local.Addr().IsUnspecified()) {
				inode = e.inode
			}
		}
	}
	if inode == "" || inode == "0" {
		return nil
	}
	want := "socket:[" + inode + "]"
	dirs, _ := os.ReadDir(procRoot)
	var out []string
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(procRoot, d.Name(), "fd"))
		for _, fd := range fds {
			if link, _ := os.Readlink(filepath.Join(procRoot, d.Name(), "fd", fd.Name())); link == want {
				comm, _ := os.ReadFile(filepath.Join(procRoot, d.Name(), "comm"))
				out = append(out, fmt.Sprintf("pid %s (%s)", d.Name(), strings.TrimSpace(string(comm))))
				break
			}
		}
	}
	return out
}
