// Command workload is the one small static program of the test images
// (internal/testing/testruntime): by its first argument it idles (the pause image and
// idle pods), allocates memory at a rate, writes a volume of data, creates
// files, or spawns sleeping processes, and then holds what it took until
// SIGTERM or SIGINT, on which it exits 0 at once (or as --on-term says).
// Build it with CGO_ENABLED=0.
//
//	workload sleep
//	workload alloc --mib 200 --rate 50
//	workload alloc --base 1200 --mib 2500 --rate 200
//	workload alloc --mib 1536 --one-call
//	workload write --dir /data --mib 100
//	workload files --dir /data --count 5000
//	workload procs --count 200
//	workload stubborn
//	workload --on-term=exit:3 alloc --mib 1000
//	workload --on-term=ignore alloc --mib 1000
//
// It prints one line when it holds what it was asked for ("workload: ready
// ...") so tests can wait for it in the container's log, and one for each
// SIGTERM ("terminated") or SIGINT ("interrupt") with the time it was
// received, RFC 3339 with nanoseconds in UTC:
//
//	workload: terminated, exiting with status 0 (received at 2026-11-29T07:40:01.123456789Z)
//	workload: terminated, ignored (received at 2026-11-29T07:40:01.123456789Z)
//
// That time is taken when main receives the signal from its channel, just
// after the Go runtime's handler has it, by the node's clock (a container
// shares it); the container log's own stamp is later, when the runtime
// read the line from the program's stdout. stubborn idles
// and ignores SIGTERM and SIGINT, printing a line for each, until SIGKILL:
// a container that needs its grace period's end. --on-term, before the
// command, says what SIGTERM and SIGINT do to any command: exit:N exits
// with status N, ignore ignores them (a line for each) until SIGKILL, as
// batch programs that report a cut-off run as an error, or that do not
// handle the signal at all, do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: workload [--on-term=exit:N|ignore] command [flags]
  workload sleep
  workload alloc --mib N [--rate R] [--base B]
                                            allocate N MiB in all, the first B MiB at once and
                                            the rest at R MiB/s (0: at once), and hold it
  workload alloc --mib N --one-call         fault in N MiB in one system call (mmap with
                                            MAP_POPULATE), which no signal but SIGKILL stops
  workload write --dir D --mib N            write N MiB into D/data and keep it
  workload files --dir D --count N          create N empty files in D
  workload procs --count N                  spawn N sleeping processes
  workload stubborn                         idle, ignoring SIGTERM and SIGINT (a line for each)
Every command but stubborn then holds what it took until SIGTERM or SIGINT (exit 0).
--on-term: on SIGTERM or SIGINT, exit with status N (default exit:0), or ignore them.
`

func main() {
	// Catch the signals first, so a SIGTERM during the work ends it too.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	args, onTerm, err := parseOnTerm(os.Args[1:])
	if err != nil || len(args) == 0 {
		if err != nil {
			fmt.Fprintf(os.Stderr, "workload: %v\n", err)
		}
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if args[0] == "stubborn" {
		onTerm = ignoreTerm
	}
	// terminated prints the signal's line with at, the time it was taken
	// off the channel, and exits or not as --on-term says.
	terminated := func(sig os.Signal, at time.Time) {
		received := at.UTC().Format(time.RFC3339Nano)
		if onTerm == ignoreTerm {
			fmt.Printf("workload: %s, ignored (received at %s)\n", sig, received)
			return
		}
		fmt.Printf("workload: %s, exiting with status %d (received at %s)\n", sig, onTerm, received)
		os.Exit(onTerm)
	}
	if args[0] == "stubborn" {
		fmt.Println("workload: ready (stubborn)")
		for sig := range stop {
			terminated(sig, time.Now())
		}
	}
	done := make(chan error, 1)
	go func() { done <- run(args[0], args[1:]) }()

	for finished := false; !finished; {
		select {
		case sig := <-stop:
			terminated(sig, time.Now())
		case err := <-done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "workload %s: %v\n", args[0], err)
				if errors.Is(err, errUsage) {
					os.Exit(2)
				}
				os.Exit(1)
			}
			finished = true
		}
	}
	for sig := range stop {
		terminated(sig, time.Now())
	}
}

// ignoreTerm is the --on-term of a program that ignores SIGTERM and SIGINT.
const ignoreTerm = -1

// parseOnTerm takes a leading --on-term=exit:N or --on-term=ignore off
// args and returns the rest with the exit status SIGTERM and SIGINT cause
// (ignoreTerm: none). Without the option the status is 0.
func parseOnTerm(args []string) ([]string, int, error) {
	if len(args) == 0 {
		return args, 0, nil
	}
	v, ok := strings.CutPrefix(args[0], "--on-term=")
	if !ok {
		return args, 0, nil
	}
	if v == "ignore" {
		return args[1:], ignoreTerm, nil
	}
	code, ok := strings.CutPrefix(v, "exit:")
	n, err := strconv.Atoi(code)
	if !ok || err != nil || n < 0 || n > 255 {
		return nil, 0, fmt.Errorf("%w: --on-term=%s: want exit:N (N from 0 to 255) or ignore", errUsage, v)
	}
	return args[1:], n, nil
}

// run does the work of one command and returns once it holds what it took
// (alloc keeps its memory reachable through a goroutine that never ends).
func run(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	mib := fs.Int("mib", 0, "MiB to allocate or write")
	rate := fs.Int("rate", 0, "allocation rate in MiB/s; 0 allocates at once")
	base := fs.Int("base", 0, "MiB of --mib allocated at once before the rate applies")
	dir := fs.String("dir", "", "directory to write into (created if missing)")
	count := fs.Int("count", 0, "number of files or processes")
	oneCall := fs.Bool("one-call", false, "alloc: fault in all of --mib in one mmap(MAP_POPULATE) system call")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	switch cmd {
	case "sleep":
		fmt.Println("workload: ready (sleeping)")
		return nil
	case "alloc":
		if *mib <= 0 || *rate < 0 || *base < 0 || *base > *mib {
			return fmt.Errorf("%w: --mib must be > 0, --rate >= 0 and --base from 0 to --mib", errUsage)
		}
		if *oneCall {
			if *rate != 0 || *base != 0 {
				return fmt.Errorf("%w: --one-call allocates all at once: no --rate nor --base", errUsage)
			}
			return allocOneCall(*mib)
		}
		return alloc(*mib, *rate, *base)
	case "write":
		if *dir == "" || *mib <= 0 {
			return fmt.Errorf("%w: --dir and --mib > 0 are required", errUsage)
		}
		return write(*dir, *mib)
	case "files":
		if *dir == "" || *count <= 0 {
			return fmt.Errorf("%w: --dir and --count > 0 are required", errUsage)
		}
		return files(*dir, *count)
	case "procs":
		if *count <= 0 {
			return fmt.Errorf("%w: --count must be > 0", errUsage)
		}
		return procs(*count)
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// errUsage marks a bad command line (exit status 2).
var errUsage = errors.New("usage")

// held keeps the allocated memory reachable for the life of the process.
var held [][]byte

// alloc allocates mib MiB, the first base MiB at once and then the rest at
// rate MiB/s, and keeps it. Each MiB is one mapping whose pages the kernel
// faults in (MAP_POPULATE), about twice as fast as faulting them one by
// one: 1,600 MiB/s is reached on one core of the development machine. The
// rate is paced by deadline: MiB base+k is due k/rate s after the ramp
// starts, and a late wake-up (a busy CPU, a timer's floor of about a
// millisecond) allocates every MiB that fell due meanwhile at once, where a
// ticker would drop the ticks missed. The ready line says the rate reached.
func alloc(mib, rate, base int) error {
	var start time.Time
	for i := range mib {
		if i == base && base > 0 {
			fmt.Printf("workload: base allocated (%d MiB)\n", base)
		}
		if i >= base && rate > 0 {
			if i == base {
				start = time.Now()
			}
			if wait := time.Until(start.Add(time.Duration(i-base) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		b, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("mmap MiB %d of %d: %w", i+1, mib, err)
		}
		// Written to as well: a page the populate could not charge to
		// the cgroup is faulted in here, where the kernel's OOM killer
		// acts as on any user fault.
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	if rate > 0 && mib > base {
		took := time.Since(start)
		fmt.Printf("workload: ready (allocated %d MiB; %d MiB at %.0f MiB/s of %d asked, in %s)\n",
			mib, mib-base, float64(mib-base)/took.Seconds(), rate, took.Round(time.Millisecond))
		return nil
	}
	fmt.Printf("workload: ready (allocated %d MiB)\n", mib)
	return nil
}

// allocOneCall maps mib MiB of anonymous memory and faults every page in
// within the one mmap system call (MAP_POPULATE), and keeps it. A SIGTERM
// waits for the call to return: no agent can stop the allocation midway
// but with SIGKILL, as the kernel's OOM killer does.
func allocOneCall(mib int) error {
	b, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap %d MiB: %w", mib, err)
	}
	held = append(held, b)
	fmt.Printf("workload: ready (allocated %d MiB in one call)\n", mib)
	return nil
}

// write writes mib MiB of incompressible data to dir/data and syncs it.
func write(dir string, mib int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	var x uint64 = 0x9e3779b97f4a7c15 // xorshift: cheap, not compressible by a filesystem
	for range mib {
		for i := 0; i+8 <= len(buf); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			for k := range 8 {
				buf[i+k] = byte(x >> (8 * k))
			}
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("workload: ready (wrote %d MiB to %s)\n", mib, f.Name())
	return nil
}

// files creates count empty files in dir.
func files(dir string, count int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range count {
		f, err := os.OpenFile(filepath.Join(dir, "f"+strconv.Itoa(i)), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("after %d files: %w", i, err)
		}
		f.Close()
	}
	fmt.Printf("workload: ready (created %d files in %s)\n", count, dir)
	return nil
}

// procs spawns count children of this same binary running "sleep". They die
// with this process (Pdeathsig), so SIGTERM to it ends them all. Each child is
// a Go process with a few threads: the tasks a pids cgroup counts are a
// small multiple of count.
func procs(count int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for i := range count {
		c := exec.Command(self, "sleep") // output to /dev/null
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return fmt.Errorf("after %d processes: %w", i, err)
		}
		go c.Wait() //nolint:errcheck // reaps the child when it dies
	}
	fmt.Printf("workload: ready (spawned %d processes)\n", count)
	return nil
}
