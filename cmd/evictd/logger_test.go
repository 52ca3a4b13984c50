package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRefusalToTheJournal checks that what the agent refuses before its
// logger exists reaches the journal as an error, every line of it.
func TestRefusalToTheJournal(t *testing.T) {
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	var stdout bytes.Buffer
	if code := run([]string{"--nope"}, &stdout, stderr); code != 2 {
		t.Errorf("got exit %d, want 2", code)
	}
	got, err := os.ReadFile(stderr.Name())
	if err != nil {
		t.Fatal(err)
	}
	if want := "<3>evictd: unknown flag: --nope\n<3>Run 'evictd --help' for usage.\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
