package cri

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
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
	got, n, err := du.usage(t.Context(), now, dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The directory, the file once (hard link), two symlinks not followed.
	if got.Inodes != 4 || got.Bytes < 64<<10 || got.Bytes >= 1<<20 {
		t.Errorf("usage = %+v, want 4 inodes and 64 KiB plus a few blocks", got)
	}
	if n != 5 {
		t.Errorf("usage counted %d entries, want 5: the directory, a, hardlink and the symlinks", n)
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
			got, _, err := du.usage(t.Context(), tt.at, dir, 100)
			if err != nil || got.Inodes != tt.wantInodes {
				t.Errorf("usage = %+v, %v; want %d inodes", got, err, tt.wantInodes)
			}
		})
	}

	t.Run("entry cap", func(t *testing.T) {
		_, _, err := newDirUsage(0, 3).usage(t.Context(), now, dir, 3)
		if !errors.Is(err, errTooMany) {
			t.Errorf("usage with a cap of 3 entries: %v, want %v", err, errTooMany)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, _, err := du.usage(t.Context(), now, filepath.Join(dir, "none"), 100)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("usage of a missing directory: %v, want ErrNotExist", err)
		}
	})
	// A directory made after it was found missing (a container's log
	// directory, made when the container is created) is measured at the
	// next call, within max age of the first.
	t.Run("made since it was missing", func(t *testing.T) {
		later := filepath.Join(dir, "later")
		if _, _, err := du.usage(t.Context(), now, later, 100); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("usage of a missing directory: %v, want ErrNotExist", err)
		}
		writeFile(t, filepath.Join(later, "0.log"), 4096)
		got, _, err := du.usage(t.Context(), now.Add(time.Second), later, 100)
		if err != nil || got.Inodes != 2 {
			t.Errorf("usage once made = %+v, %v; want the directory and its file", got, err)
		}
	})
	t.Run("bounded cache", func(t *testing.T) {
		d := newDirUsage(time.Hour, 10)
		many := t.TempDir()
		most := 0
		for i := range maxCached + 10 {
			sub := filepath.Join(many, strconv.Itoa(i))
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.usage(t.Context(), now, sub, 10); err != nil {
				t.Fatal(err)
			}
			most = max(most, len(d.cache))
		}
		if most > maxCached || most < maxCached-1 {
			t.Errorf("cache held up to %d directories, want up to %d", most, maxCached)
		}
	})
}

// TestDirUsageBudget measures a directory of 10 entries within budgets
// smaller and larger than it: a result, walked or cached, spends its
// entries, and a directory past the budget spends all of it.
func TestDirUsageBudget(t *testing.T) {
	dir := t.TempDir()
	makeEmptyFiles(t, dir, 9)
	now := time.Now()
	steps := []struct {
		name    string
		limit   int
		wantN   int
		wantErr error
	}{
		{"past the budget: walked", 5, 5, errTooMany},
		{"past a smaller one: cached", 4, 4, errTooMany},
		{"within a larger one: walked again", 10, 10, nil},
		{"past a smaller one: from the cached count", 9, 9, errTooMany},
		{"within a larger one: cached", 50, 10, nil},
	}
	du := newDirUsage(time.Hour, 100)
	for _, s := range steps {
		u, n, err := du.usage(t.Context(), now, dir, s.limit)
		if !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
			t.Errorf("%s: err %v, want %v", s.name, err, s.wantErr)
		}
		if n != s.wantN {
			t.Errorf("%s: spent %d entries, want %d", s.name, n, s.wantN)
		}
		if err == nil && u.Inodes != 10 {
			t.Errorf("%s: %d inodes, want 10", s.name, u.Inodes)
		}
	}
}

// TestPodDirsBudget gives each pod 10 entries for its logs (3 entries)
// and volumes (6 each): the first volume fits in what the logs left, the
// second does not, and the next pod has a budget of its own.
func TestPodDirsBudget(t *testing.T) {
	kubeletRoot, logsDir := t.TempDir(), t.TempDir()
	du := newDirUsage(time.Hour, 10)
	for _, uid := range []string{"uid-1", "uid-2"} {
		p := signals.Pod{Namespace: "ns", Name: "p-" + uid, UID: uid, LocalVolumes: []string{"a", "b", "host"}}
		logs := filepath.Join(logsDir, p.Namespace+"_"+p.Name+"_"+p.UID, "app")
		volumes := filepath.Join(kubeletRoot, "pods", uid, "volumes")
		for dir, files := range map[string]int{
			logs: 2,
			filepath.Join(volumes, "kubernetes.io~empty-dir", "a"): 5,
			filepath.Join(volumes, "kubernetes.io~configmap", "b"): 5,
		} {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			makeEmptyFiles(t, dir, files)
		}

		st, errs := podDirs(t.Context(), du, time.Now(), p, []string{"app"}, kubeletRoot, logsDir)
		if len(st.Containers) != 1 || st.Containers[0].Logs == nil || st.Containers[0].Logs.Inodes != 3 {
			t.Errorf("pod %s: containers %+v, want app with logs of 3 inodes", uid, st.Containers)
		}
		if a, ok := st.Volumes["a"]; !ok || a.Inodes != 6 || len(st.Volumes) != 1 {
			t.Errorf("pod %s: volumes %+v, want a alone, of 6 inodes", uid, st.Volumes)
		}
		if len(errs) != 1 || !errors.Is(errs[0], errTooMany) || !strings.Contains(errs[0].Error(), "volume b") {
			t.Errorf("pod %s: errors %v, want volume b's %v", uid, errs, errTooMany)
		}
	}
}

// TestPodDirsStayInTheirDirectories: a pod whose UID, name, container or
// volume would name a directory outside the kubelet's (what a broken API
// server could send) is not measured there, and says why; nothing outside
// is walked.
func TestPodDirsStayInTheirDirectories(t *testing.T) {
	root := t.TempDir()
	kubeletRoot, logsDir := filepath.Join(root, "kubelet"), filepath.Join(root, "logs")
	// Outside both: what ".." would reach.
	makeEmptyFiles(t, root, 50)
	du := newDirUsage(time.Hour, 1000)
	for _, tc := range []struct {
		name string
		pod  signals.Pod
		ctrs []string
		want string
	}{
		{"UID", signals.Pod{Namespace: "ns", Name: "p", UID: "..", LocalVolumes: []string{"a"}}, nil, `".." cannot name a directory`},
		{"UID with a slash", signals.Pod{Namespace: "ns", Name: "p", UID: "../../x", LocalVolumes: []string{"a"}}, nil, "cannot name a directory"},
		{"name", signals.Pod{Namespace: "ns", Name: "a/../..", UID: "u"}, []string{"app"}, "cannot name a directory"},
		{"container", signals.Pod{Namespace: "ns", Name: "p", UID: "u"}, []string{"../../.."}, `container "../../.."`},
		{"volume", signals.Pod{Namespace: "ns", Name: "p", UID: "u", LocalVolumes: []string{".."}}, nil, `volume ".."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, errs := podDirs(t.Context(), du, time.Now(), tc.pod, tc.ctrs, kubeletRoot, logsDir)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errors %v, want one saying %q", errs, tc.want)
			}
			if len(st.Volumes) != 0 {
				t.Errorf("volumes %+v measured, want none", st.Volumes)
			}
			for _, c := range st.Containers {
				if c.Logs != nil {
					t.Errorf("container %s logs %+v measured, want none", c.Name, c.Logs)
				}
			}
		})
	}
}
