package testnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// envWorker marks the re-executed process of Supervise that does the work.
const envWorker = "EVICTD_TESTNODE_WORKER"

// Supervise lets a program that runs a node from a terminal (the demo, the
// benchmarks) stop it cleanly on Ctrl-C. Called first thing in main: in the
// worker it returns worker=true and the program goes on; otherwise it runs
// the program again as the worker in a process group of its own, turns
// each Ctrl-C (or SIGTERM) into one SIGTERM for the worker, printing
// stopping (first time) or again (later), and returns the worker's exit
// code for main to exit with. The node's components are the worker's
// children, in its group, so a Ctrl-C on the terminal reaches only the
// supervisor, and the worker stops them in order instead of every one of
// them catching the SIGINT at once.
func Supervise(prog, stopping, again string) (code int, worker bool) {
	if os.Getenv(envWorker) != "" {
		return 0, true
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 1, false
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envWorker+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 1, false
	}
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
			}
			if n == 0 {
				fmt.Printf("\n%s: %s\n", prog, stopping)
			} else {
				fmt.Printf("\n%s: %s\n", prog, again)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 1, false
		}
		return exit.ExitCode(), false
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 1, false
	}
	return 0, false
}
