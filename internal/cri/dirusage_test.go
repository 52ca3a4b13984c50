package cri

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDirUsage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), 64<<10)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "big")
	writeFile(t, outside, 1<<20)
	if err := os.Symlink(outside, filepath.Join(dir, "symlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}

	du := newDirUsage(10*time.Second, 100)
	now := time.Now()
	got, err := du.usage(t.Context(), now, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The directory, the file once (hard link), two symlinks not followed.
	if got.Inodes != 4 || got.Bytes < 64<<10 || got.Bytes >= 1<<20 {
		t.Errorf("usage = %+v, want 4 inodes and 64 KiB plus a few blocks", got)
	}

	writeFile(t, filepath.Join(dir, "b"), 64<<10)
	tests := []struct {
		name       string
		at         time.Time
		wantInodes int64
	}{
		{"within max age: cached", now.Add(9 * time.Second), 4},
		{"past max age: walked again", now.Add(10 * time.Second), 5},
		{"clock went back: walked again", now.Add(-time.Second), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := du.usage(t.Context(), tt.at, dir)
			if err != nil || got.Inodes != tt.wantInodes {
				t.Errorf("usage = %+v, %v; want %d inodes", got, err, tt.wantInodes)
			}
		})
	}

	t.Run("entry cap", func(t *testing.T) {
		_, err := newDirUsage(0, 3).usage(t.Context(), now, dir)
		if !errors.Is(err, errTooMany) {
			t.Errorf("usage with a cap of 3 entries: %v, want %v", err, errTooMany)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := du.usage(t.Context(), now, filepath.Join(dir, "none"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("usage of a missing directory: %v, want ErrNotExist", err)
		}
	})
	t.Run("bounded cache", func(t *testing.T) {
		d := newDirUsage(time.Hour, 10)
		for i := range maxCached + 10 {
			_, _ = d.usage(t.Context(), now, filepath.Join(dir, "none", string(rune('a'+i%26)), time.Duration(i).String()))
		}
		if n := len(d.cache); n > maxCached {
			t.Errorf("cache holds %d directories, want at most %d", n, maxCached)
		}
	})
}
