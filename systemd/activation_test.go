package systemd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// listenerChild is the environment variable that makes this test binary
// call Listener and print what it got, for TestListener.
const listenerChild = "EVICTD_TEST_LISTENER"

func TestMain(m *testing.M) {
	if os.Getenv(listenerChild) == "1" {
		ln, err := Listener()
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ln == nil:
			fmt.Println("none")
		default:
			fmt.Println("listener:", ln.Addr())
		}
		fmt.Printf("left: LISTEN_PID=%q LISTEN_FDS=%q LISTEN_FDNAMES=%q\n", os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestListener passes descriptors to a child the way systemd does (from
// fd 3, LISTEN_FDS, and LISTEN_PID set to the child's PID by a shell that
// execs it) and checks what Listener makes of them.
func TestListener(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	listening := func() (*os.File, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, ln.Addr().String()
	}
	notSocket, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer notSocket.Close()
	one, oneAddr := listening()
	two, _ := listening()

	for _, tc := range []struct {
		name      string
		files     []*os.File
		listenPID string // "$$": the child's own
		want      string
	}{
		{"one socket", []*os.File{one}, "$$", "listener: " + oneAddr},
		{"none passed", nil, "$$", "none"},
		{"for another process", []*os.File{one}, "1", "none"},
		{"two sockets", []*os.File{one, two}, "$$", "error: systemd passed 2 sockets (LISTEN_FDS=2), want one"},
		{"not a socket", []*os.File{notSocket}, "$$", "error: use the socket systemd passed (fd 3, evictd.socket): not a listening stream socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sh, "-c", `export LISTEN_PID=`+tc.listenPID+`; exec "$0"`, os.Args[0])
			cmd.Env = append(os.Environ(), listenerChild+"=1", "LISTEN_FDNAMES=evictd.socket")
			if len(tc.files) > 0 {
				cmd.Env = append(cmd.Env, fmt.Sprintf("LISTEN_FDS=%d", len(tc.files)))
			}
			cmd.ExtraFiles = tc.files
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			got := string(out)
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !strings.Contains(got, `left: LISTEN_PID="" LISTEN_FDS="" LISTEN_FDNAMES=""`) {
				t.Errorf("got %q, want LISTEN_* unset for evictd's children", got)
			}
		})
	}
}
