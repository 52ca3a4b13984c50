package release

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// version is the VERSION the test builds with, so the artifacts' names are
// known and the binary can be asked for it.
const version = "v0.0.0-test.1"

// TestMakeRelease runs `make release` into a scratch DIST and checks that
// each architecture's binary is there under its release name, static (no
// program interpreter: it runs whatever the node's libc) and built for that
// machine, and that SHA256SUMS lists exactly those binaries with their
// digests. The binary for this machine is asked its version.
func TestMakeRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles evictd for two architectures")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	dist := t.TempDir()
	cmd := exec.Command(makeBin, "-C", filepath.Join("..", ".."), "release", "DIST="+dist, "VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	want := map[string]string{} // name → sha256
	for arch, machine := range machines {
		name := "evictd-" + version + "-linux-" + arch
		t.Run(arch, func(t *testing.T) {
			path := filepath.Join(dist, name)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatalf("open the release binary: %v", err)
			}
			defer f.Close()
			if f.Machine != machine {
				t.Errorf("%s: got machine %v, want %v", name, f.Machine, machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s: got a program interpreter (dynamically linked), want a static binary", name)
				}
			}
			if _, err := f.DynamicSymbols(); err == nil {
				t.Errorf("%s: got dynamic symbols, want a static binary", name)
			}
			want[name] = sha256File(t, path)
			if arch == runtime.GOARCH {
				out, err := exec.Command(path, "version").Output()
				if err != nil {
					t.Fatalf("%s version: %v", name, err)
				}
				if !strings.Contains(string(out), version) {
					t.Errorf("%s version: got %q, want it to name %s", name, out, version)
				}
			}
		})
	}

	sums, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		// sha256sum's format: the hex digest, two spaces (or a space
		// and '*' for binary mode), the file name.
		sum, name, ok := strings.Cut(sc.Text(), " ")
		if !ok || len(name) < 2 || (name[0] != ' ' && name[0] != '*') {
			t.Fatalf("SHA256SUMS: not a sha256sum line: %q", sc.Text())
		}
		got[name[1:]] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("SHA256SUMS: got %d entries %v, want %d", len(got), got, len(want))
	}
	for name, sum := range want {
		if got[name] != sum {
			t.Errorf("SHA256SUMS %s: got %q, want %q", name, got[name], sum)
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
