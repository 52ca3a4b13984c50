package testruntime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvWorkloadBin names a prebuilt static workload binary (hack/workload);
// without it Start builds one with the go command.
const EnvWorkloadBin = "EVICTD_WORKLOAD_BIN"

const (
	mainModule     = "github.com/evictd/evictd"
	workloadModule = mainModule + "/hack/workload"
)

// workloadBinary returns the workload binary to put in images: path if set,
// else $EVICTD_WORKLOAD_BIN, else one built into dir from the repository
// that holds the working directory (static, CGO_ENABLED=0; Go's build cache
// makes this quick after the first time).
func workloadBinary(path, dir string) (string, error) {
	if path == "" {
		path = os.Getenv(EnvWorkloadBin)
	}
	if path != "" {
		if fi, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("workload binary: %w", err)
		} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("workload binary %s: not an executable file", path)
		}
		return path, nil
	}
	out := filepath.Join(dir, "workload")
	if err := GoBuild(workloadModule, out); err != nil {
		return "", fmt.Errorf("workload binary: %w (or set %s)", err, EnvWorkloadBin)
	}
	return out, nil
}

// BuildTags are the build tags of the Makefile's TAGS: gRPC without
// golang.org/x/net/trace (grpcnotrace), as evictd is released.
const BuildTags = "grpcnotrace"

// GoBuild builds the package pkg of the main module (an import path) into a
// static binary at out (CGO_ENABLED=0, trimmed, stripped, with the build
// tags of `make build`: BuildTags), in the repository that holds the
// working directory. Go's build cache makes it quick after the first time.
func GoBuild(pkg, out string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command to build %s: %w", pkg, err)
	}
	cmd := exec.Command(goBin, "build", "-tags", BuildTags, "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// moduleRoot walks up from the working directory to the go.mod of the main
// module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isMainModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + mainModule + " above the working directory")
		}
		dir = parent
	}
}

func isMainModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == mainModule
		}
	}
	return false
}

// WorkloadBinary returns the workload binary Start puts in images:
// $EVICTD_WORKLOAD_BIN, or one built into dir. A test guest that shares
// the host's files gets it this way, built on the host.
func WorkloadBinary(dir string) (string, error) { return workloadBinary("", dir) }
