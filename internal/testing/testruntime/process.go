package testruntime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// How long containerd gets to exit after SIGTERM, and how long the
// processes it leaves get after SIGKILL.
const (
	termGrace = 10 * time.Second
	killGrace = childproc.KillGrace
)

// runCommand runs a command to completion and returns its standard output;
// its error names the command and carries its output.
func runCommand(name string, args ...string) (string, error) {
	return runCommandContext(context.Background(), nil, name, args...)
}

// runCommandContext is runCommand with a context and an optional standard
// input.
func runCommandContext(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		if len(out) > 4000 {
			out = "…" + out[len(out)-4000:]
		}
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return stdout.String(), nil
}
