package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// envRecorder makes the test binary, run again, a server that listens on
// the address it holds and prints each request's Authorization header:
// the listener `evictd status` must not give its token to.
const envRecorder = "EVICTD_TEST_RECORD_REQUESTS"

func TestMain(m *testing.M) {
	if listen := os.Getenv(envRecorder); listen != "" {
		recordRequests(listen)
		return
	}
	os.Exit(m.Run())
}

// recordRequests serves on listen until its stdin closes: "listening
// ADDR", then "request PATH authorization "…"" for each request.
func recordRequests(listen string) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	fmt.Println("listening", l.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		mu.Lock() // no line cut short
		os.Exit(0)
	}()
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Printf("request %s authorization %q\n", r.URL.Path, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	}))
}

// recorder is the test binary run as a request recorder.
type recorder struct {
	addr  string
	pid   int
	stdin io.Closer
	lines chan string
	cmd   *exec.Cmd
}

// startRecorder runs bin (a copy of the test binary every user may run)
// as uid, listening on listen.
func startRecorder(t *testing.T, bin string, uid int, listen string) *recorder {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), envRecorder+"="+listen)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &recorder{pid: cmd.Process.Pid, stdin: stdin, lines: make(chan string, 100), cmd: cmd}
	t.Cleanup(func() { r.stop() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("recorder as uid %d said nothing", uid)
	}
	first := sc.Text()
	addr, ok := strings.CutPrefix(first, "listening ")
	if !ok {
		t.Fatalf("recorder as uid %d: %s", uid, first)
	}
	r.addr = addr
	go func() {
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	return r
}

// stop ends the recorder and returns the requests it saw.
func (r *recorder) stop() []string {
	if r.stdin == nil {
		return nil
	}
	r.stdin.Close()
	r.stdin = nil
	var got []string
	for l := range r.lines {
		got = append(got, l)
	}
	_ = r.cmd.Wait()
	return got
}

// executableCopy copies the test binary into a directory every user may
// search: the build's own is root's alone.
func executableCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "evictd-recorder")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "evictd.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// nonLoopbackIP is an address of this host that is not loopback, or "".
func nonLoopbackIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestStatusTokenOnlyToItsOwner runs a server that records what it is
// sent, as root and as nobody, and asks it with `evictd status` and a
// token over plain HTTP: only a loopback socket of root, the caller or
// --agent-user gets the token; another user's gets a connection and no
// request, and status names it.
func TestStatusTokenOnlyToItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a listener as nobody")
	}
	const nobody = 65534
	bin := executableCopy(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		uid    int
		listen string
		args   []string
		code   int
		// stderr must contain each, with ADDR the recorder's address
		// and PID its pid; "" for none.
		stderr []string
		// auth is the Authorization the recorder must have seen, "-"
		// for no request at all.
		auth string
	}{
		{name: "root's socket", uid: 0, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token}, auth: "Bearer t0ken"},
		{name: "root's socket on ::1", uid: 0, listen: "[::1]:0", args: []string{"--metrics-bearer-token-file", token}, auth: "Bearer t0ken"},
		{name: "nobody's socket", uid: nobody, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token}, code: 1,
			stderr: []string{"evictd status: not sending the token to ADDR: the socket listening there belongs to uid 65534 (nobody), pid PID (evictd.test), not to uid 0 (root): another user's process holds the agent's port. If evictd runs as that user, name it with --agent-user; or reach the agent over TLS with --metrics-ca-file\n"},
			auth:   "-"},
		{name: "nobody's socket listening on every address", uid: nobody, listen: ":0", args: []string{"--metrics-bearer-token-file", token}, code: 1,
			stderr: []string{"belongs to uid 65534 (nobody), pid PID (evictd.test)"}, auth: "-"},
		{name: "nobody's socket, nobody named with --agent-user", uid: nobody, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token, "--agent-user", "nobody"}, auth: "Bearer t0ken"},
		{name: "nobody's socket, its uid given with --agent-user", uid: nobody, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token, "--agent-user", "65534"}, auth: "Bearer t0ken"},
		{name: "nobody's socket, another user named", uid: nobody, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token, "--agent-user", "1"}, code: 1,
			stderr: []string{"belongs to uid 65534 (nobody), pid PID (evictd.test), not to uid 0 (root) or uid 1 ("}, auth: "-"},
		{name: "nobody's socket, no token to give", uid: nobody, listen: "127.0.0.1:0", auth: ""},
		{name: "an unknown --agent-user", uid: 0, listen: "127.0.0.1:0", args: []string{"--metrics-bearer-token-file", token, "--agent-user", "no-such-user-here"}, code: 2,
			stderr: []string{`evictd status: --agent-user: invalid value "no-such-user-here": user: unknown user no-such-user-here`}, auth: "-"},
		{name: "root's socket on an address that is not loopback", uid: 0, listen: "NONLOOPBACK:0", args: []string{"--metrics-bearer-token-file", token}, code: 1,
			stderr: []string{"evictd status: not sending the token to ADDR: it is not a loopback address, and plain HTTP would carry the token over the network; give the CA of the agent's --metrics-tls-cert-file with --metrics-ca-file\n"},
			auth:   "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := tc.listen
			if ip, ok := strings.CutPrefix(listen, "NONLOOPBACK"); ok {
				if listen = nonLoopbackIP(); listen == "" {
					t.Skip("this host has no address but loopback")
				}
				listen += ip
			}
			rec := startRecorder(t, bin, tc.uid, listen)
			// A socket on every address is asked on 127.0.0.1.
			addr := rec.addr
			if ap := netip.MustParseAddrPort(addr); ap.Addr().IsUnspecified() {
				addr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
			}
			out, errOut, code := runCmd(append([]string{"status", "--config=", "--metrics-bind-address", addr}, tc.args...)...)
			seen := rec.stop()
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, out, errOut)
			}
			for _, want := range tc.stderr {
				want = strings.ReplaceAll(strings.ReplaceAll(want, "ADDR", addr), "PID", fmt.Sprint(rec.pid))
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q, want it to contain %q", errOut, want)
				}
			}
			switch {
			case tc.auth == "-" && len(seen) > 0:
				t.Errorf("the server was sent %q, want no request", seen)
			case tc.auth != "-" && (len(seen) != 1 || seen[0] != fmt.Sprintf("request /status authorization %q", tc.auth)):
				t.Errorf("the server was sent %q, want one request for /status with authorization %q", seen, tc.auth)
			}
		})
	}
}

func TestParseProcAddr(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"0100007F:9BA7", "127.0.0.1:39847"},
		{"00000000:1F90", "0.0.0.0:8080"},
		{"00000000000000000000000001000000:1F90", "[::1]:8080"},
		{"0000000000000000FFFF00000100007F:2679", "127.0.0.1:9849"},
		{"0000000000000000FFFF00000101A8C0:0016", "192.168.1.1:22"},
		{"000080FE000000000000000001000000:0050", "[fe80::1]:80"},
		{"0100007F", "error"},
		{"0100007:9BA7", "error"},
		{"0100007F:19BA7", "error"},
		{"ZZ00007F:9BA7", "error"},
	} {
		got, err := parseProcAddr(tc.in)
		s := got.String()
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("parseProcAddr(%q) = %s (%v), want %s", tc.in, s, err, tc.want)
		}
	}
}

// TestPeerCheckReadsProc checks the lookup on a /proc of the test's
// making: the server end of the connection decides, not another socket
// on the same port.
func TestPeerCheckReadsProc(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	tcp := header +
		"   0: 0100007F:2677 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0\n" +
		"   1: 0100007F:2677 0100007F:C218 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 0 0 10 -1\n" +
		"   2: 0100007F:C218 0100007F:2677 01 00000000:00000000 00:00000000 00000000  1000        0 1002 2 0 20 0 0 10 -1\n" +
		"   3: 0100007F:2677 0100007F:C219 03 00000000:00000000 00:00000000 00000000 65534        0 0 1 0 20 0 0 10 -1\n"
	tcp6 := header +
		"   0: 0000000000000000FFFF00000100007F:2677 0000000000000000FFFF00000100007F:C21A 01 00000000:00000000 00:00000000 00000000   998        0 0 1 0 20 0 0 10 -1\n"
	if err := os.WriteFile(filepath.Join(proc, "net", "tcp"), []byte(tcp), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "net", "tcp6"), []byte(tcp6), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &peerCheck{procRoot: proc}
	server := netip.MustParseAddrPort("127.0.0.1:9847")
	for _, tc := range []struct {
		from string
		uid  int
		err  bool
	}{
		{"127.0.0.1:49688", 0, false},     // established, not yet accepted
		{"127.0.0.1:49689", 65534, false}, // a request in SYN_RECV
		{"127.0.0.1:49690", 998, false},   // on a dual-stack socket
		{"127.0.0.1:49691", 0, true},      // not there
	} {
		uid, err := c.serverUID(netip.MustParseAddrPort(tc.from), server)
		if uid != tc.uid || (err != nil) != tc.err {
			t.Errorf("from %s: got uid %d, %v; want %d, error %v", tc.from, uid, err, tc.uid, tc.err)
		}
	}
}
