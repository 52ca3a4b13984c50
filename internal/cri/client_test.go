package cri

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/testing/testruntime"
)

// TestDialAbsentRuntimeLeaksNothing: dialing a runtime that is not there
// fails at once, naming the endpoint, and leaves no connection (and so no
// goroutine) behind, however often the agent retries.
func TestDialAbsentRuntimeLeaksNothing(t *testing.T) {
	dir := t.TempDir()
	// A socket path with nothing behind it, and one whose listener accepts
	// and hangs up (not a CRI server).
	absent := filepath.Join(dir, "absent.sock")
	before := runtime.NumGoroutine()
	for range 50 {
		_, err := Dial(context.Background(), absent, "", 200*time.Millisecond, nil)
		if err == nil || !strings.Contains(err.Error(), absent) {
			t.Fatalf("Dial(%s): got %v, want an error naming the endpoint", absent, err)
		}
	}
	// Give anything started a moment to show up, then compare.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines: %d before 50 failed dials, %d after", before, after)
	}

	l, err := net.Listen("unix", filepath.Join(dir, "plain.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Dial(context.Background(), l.Addr().String(), "", 300*time.Millisecond, nil); err == nil {
		t.Errorf("Dial to a socket that is not a CRI server: got no error")
	}
}

// TestLargeReplyKeepsNoBuffer: a reply of more than 32 KiB (a sandbox list
// on a node of a hundred pods) leaves no buffer in the agent's heap once it
// is decoded. With gRPC's default buffer pool each such reply takes a
// 1 MiB buffer that outlives the call, on every housekeeping tick.
func TestLargeReplyKeepsNoBuffer(t *testing.T) {
	cgroupParent := fmt.Sprintf("/evictd-cri-reply-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{})
	c := dial(t, rt)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// 16 annotations of 3 KiB: about 48 KiB in the reply.
	annotations := make(map[string]string, 16)
	for i := range 16 {
		annotations[fmt.Sprintf("evictd.test/a%d", i)] = strings.Repeat("x", 3<<10)
	}
	uid := fmt.Sprintf("reply-%d", os.Getpid())
	sandbox, err := c.rs.client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "reply", Uid: uid, Namespace: "default"},
		Labels:      map[string]string{labelPodUID: uid},
		Annotations: annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		id := sandbox.GetPodSandboxId()
		if err := c.rs.StopPodSandbox(ctx, id); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := c.rs.client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})

	list := func() int {
		items, err := c.rs.ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatalf("ListPodSandbox: %v", err)
		}
		return proto.Size(&runtimeapi.ListPodSandboxResponse{Items: items})
	}
	// The first call also builds protobuf's tables for the CRI messages,
	// which stay; two collections drop any buffer it left in a pool.
	if size := list(); size <= 32<<10 {
		t.Fatalf("the reply is %d bytes, want more than 32 KiB", size)
	}
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	live()
	before := live()
	list()
	// One collection: a pooled buffer would still be held (sync.Pool
	// keeps what was put back until the second collection after).
	after := live()
	if after > before+256<<10 {
		t.Errorf("live heap %d bytes before a ListPodSandbox of a 48 KiB reply, %d after: the reply's buffer was kept", before, after)
	}
}
