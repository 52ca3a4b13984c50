package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/testing/guestnode"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// The grid on cgroup v2 (--guest) runs in a qemu guest with a real kubelet
// (internal/testing/testvm): the control plane on this machine, and
// containerd, the kubelet, evictd and the harness in the guest, which
// reaches the API server through one forwarded port. TCG makes the guest
// slower than this machine by a factor s that varies from run to run, so
// both sides time touching guestTouchMiB of new memory in the same run
// and the guest divides every amount of memory of the scenario (rates,
// thresholds, the base's distance to the threshold, the overshoot) by s:
// times stay as natively, so a headroom lasts as long as natively at the
// native rate. The tables keep the native rates and thresholds as labels;
// the ramp column says what the guest reached.
const (
	guestNodeName = "bench-node-v2"
	guestTouchMiB = 256
	// guestFs is the guest's tmpfs for the kubelet's root, the pods' logs
	// and containerd's root (the guest's root is an overlay, which cannot
	// be an overlay snapshotter's upper layer).
	guestFs = "/run/benchfs"
	// guestPodsMiB is the kubepods limit in the guest, of its 3 GiB.
	guestPodsMiB    = 1024
	guestMemoryMiB  = 3072
	guestOutputFile = "bench-node.out"
)

// guestArgs returns the guest's command line: this one without --guest
// and its own, with the guest's kubepods limit unless args set one, and
// the output in the shared directory.
func guestArgs(args []string, nativeTouch time.Duration) []string {
	out := []string{"--pods-mib=" + strconv.Itoa(guestPodsMiB)}
	for _, a := range args {
		if a == "--guest" || a == "-guest" || strings.HasPrefix(a, "--guest=") || strings.HasPrefix(a, "-guest=") {
			continue
		}
		out = append(out, a)
	}
	return append(out, "--in-guest="+testvm.GuestDir, "--native-touch="+nativeTouch.String(), "--out="+filepath.Join(testvm.GuestDir, guestOutputFile))
}

// runGuest is --guest on this machine: it starts the control plane, boots
// the guest with this program in it (--in-guest), copies the guest's
// output to stdout as it comes, and its files to cfg.out's place.
func runGuest(ctx context.Context, cfg config, args []string) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("--guest: the guest's export of / needs root")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	touch := testvm.TouchTime(guestTouchMiB)
	fmt.Printf("%s this machine touches %d MiB of new memory in %s\n", time.Now().Format("15:04:05"), guestTouchMiB, touch.Round(time.Millisecond))

	dir, err := os.MkdirTemp("", "evictd-benchnode-v2-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	h, err := guestnode.Start(ctx, dir, guestNodeName)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.Stop()) }()

	vmCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	followed := make(chan struct{})
	go func() { defer close(followed); follow(vmCtx, filepath.Join(h.Shared, "output"), os.Stdout) }()
	script := "modprobe bridge && modprobe veth && mkdir -p " + guestFs + " && mount -t tmpfs -o size=1g tmpfs " + guestFs +
		" && " + guestnode.Script(wd, append([]string{self}, guestArgs(args, touch)...)...)
	res, err := h.Run(ctx, testvm.Options{
		Script:    script,
		MemoryMiB: guestMemoryMiB,
		Timeout:   cfg.guestTimeout,
	})
	cancel()
	<-followed
	if res != nil {
		fmt.Printf("%s the guest booted in %s and powered off after %s\n", time.Now().Format("15:04:05"), res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond))
	}
	if cfg.out != "" {
		copyErr := copyOutputs(h.Shared, cfg.out)
		err = errors.Join(err, copyErr)
	}
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the guest's benchmark failed (exit %d)", res.ExitCode)
	}
	return nil
}

// copyOutputs copies the guest's bench-node.out and the files beside it
// (logs, charts) to out and the same names beside it.
func copyOutputs(shared, out string) error {
	matches, err := filepath.Glob(filepath.Join(shared, guestOutputFile+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dst := out + strings.TrimPrefix(filepath.Base(m), guestOutputFile)
		errs = append(errs, os.WriteFile(dst, data, 0o644))
	}
	return errors.Join(errs...)
}

// follow copies what is appended to path to w until ctx ends, and then
// the rest.
func follow(ctx context.Context, path string, w io.Writer) {
	var off int64
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return
		}
		n, _ := io.Copy(w, f)
		off += n
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			copyNew()
			return
		case <-tick.C:
			copyNew()
		}
	}
}

// guestNodeOptions are the node's in the guest (--in-guest): it joins the
// control plane of the kubeconfigs in the shared directory, with its files
// on the guest's tmpfs.
func guestNodeOptions(cfg config, kubelet testnode.KubeletOptions) testnode.Options {
	return testnode.Options{
		Name:         guestNodeName,
		PodsMemory:   int64(cfg.podsMiB) << 20,
		Kubelet:      kubelet,
		NodeFs:       guestFs,
		ImageFs:      guestFs,
		ReadyTimeout: 6 * time.Minute,
		ControlPlane: guestnode.Remote(cfg.inGuest),
	}
}

// scaled is v MiB of the native scenario in the guest: divided by the
// guest's slowdown, at least 1. Natively (scale 1) it is v.
func (c config) scaled(v int) int {
	if c.scale == 0 || c.scale == 1 {
		return v
	}
	return max(1, int(math.Round(float64(v)/c.scale)))
}
