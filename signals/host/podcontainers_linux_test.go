package host

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// containerTrees places, for each fixture tree, the best-effort pod's
// memory cgroup and its containers' cgroup directories as the kubelet's
// driver and the runtime name them.
var containerTrees = map[string]struct {
	podDir string
	v2     bool
	// dir is a container's directory name for its ID.
	dir func(id string) string
}{
	"cgroupv1": {"memory/kubepods/besteffort/pod33333333-3333-3333-3333-333333333333", false,
		func(id string) string { return id }},
	"cgroupv1-systemd": {"memory/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_6666_6666_6666_666666666666.slice", false,
		func(id string) string { return "cri-containerd-" + id + ".scope" }},
	"cgroupv2": {"kubepods/besteffort/pod99999999-9999-9999-9999-999999999999", true,
		func(id string) string { return id }},
	"cgroupv2-systemd": {"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podcccccccc_cccc_cccc_cccc_cccccccccccc.slice", true,
		func(id string) string { return "cri-containerd-" + id + ".scope" }},
}

// writeContainerCgroup makes (or rewrites) a container's memory cgroup
// files in dir: usage, and inactive file pages in memory.stat.
func writeContainerCgroup(t *testing.T, dir string, v2 bool, usage, inactive int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	usageName, stat := "memory.usage_in_bytes", "cache 0\ninactive_file "+itoa(inactive)+"\ntotal_inactive_file "+itoa(inactive)+"\n"
	if v2 {
		usageName, stat = "memory.current", "anon 1\nfile 2\ninactive_file "+itoa(inactive)+"\n"
	}
	if err := os.WriteFile(filepath.Join(dir, usageName), []byte(itoa(usage)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ctrWS(name string, ws int64) signals.ContainerStats {
	return signals.ContainerStats{Name: name, MemoryWorkingSet: signals.Int64(ws)}
}

// TestPodStatsReaderContainers: with a pod's working set come those of its
// containers that have an ID, each from its own cgroup below the pod's
// (usage less inactive file pages, clamped at 0), in the order of the
// pod's containers, in every layout; a container without an ID, or whose
// cgroup is not there, is left out without an error; a read of task counts
// alone reads no container.
func TestPodStatsReaderContainers(t *testing.T) {
	const (
		appID  = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
		sideID = "aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233"
		goneID = "deadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeef"
	)
	for tree, layout := range containerTrees {
		t.Run(tree, func(t *testing.T) {
			f := fixturePods[tree]
			be := f.pods[2]
			cgroup := copyFixture(t, tree)
			podDir := filepath.Join(cgroup, layout.podDir)
			writeContainerCgroup(t, filepath.Join(podDir, layout.dir(appID)), layout.v2, 700<<20, 100<<20)
			writeContainerCgroup(t, filepath.Join(podDir, layout.dir(sideID)), layout.v2, 30<<20, 40<<20)
			r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), cgroup, f.driver))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			pod := be.pod()
			pod.Containers = []signals.Container{
				{Name: "app", ID: appID},
				{Name: "unreported"},        // the kubelet has not said yet
				{Name: "ended", ID: goneID}, // its cgroup is gone
				{Name: "proxy", ID: sideID}, // a sidecar, listed after the app containers
			}
			want := be.stats()
			want.Containers = []signals.ContainerStats{ctrWS("app", 600<<20), ctrWS("proxy", 0)}
			got, err := r.Read(context.Background(), []signals.Pod{pod}, now, allPodKinds)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if w := map[string]signals.PodStats{be.uid: want}; !reflect.DeepEqual(got, w) {
				t.Errorf("got %s, want %s", dumpStats(got), dumpStats(w))
			}

			got, err = r.Read(context.Background(), []signals.Pod{pod}, now, signals.PodProcesses)
			if err != nil {
				t.Fatalf("processes alone: got error %v", err)
			}
			if c := got[be.uid].Containers; c != nil {
				t.Errorf("processes alone: containers %+v, want none read", c)
			}
		})
	}
}

// TestPodStatsReaderContainerInstances: a container's cgroup not found is
// looked for again at the next Read and read once it is there; its files
// stay open from one Read to the next; a new instance (another ID) is read
// from its own cgroup and the old one's files are closed, as are those of a
// container no longer listed, of one whose cgroup stops reading (left
// out, no error, the pod's figure kept) and of a pod gone.
func TestPodStatsReaderContainerInstances(t *testing.T) {
	const first, second = "1111aaaa", "2222bbbb"
	tree := "cgroupv1"
	layout := containerTrees[tree]
	be := fixturePods[tree].pods[2]
	cgroup := copyFixture(t, tree)
	podDir := filepath.Join(cgroup, layout.podDir)
	r := fixtureReader(t, cgroup)
	pod := be.pod()
	pod.Containers = []signals.Container{{Name: "app", ID: first}}

	read := func(step string, p signals.Pod, want []signals.ContainerStats, wantOpen int) {
		t.Helper()
		got, err := r.Read(context.Background(), []signals.Pod{p}, now, signals.PodMemory)
		if err != nil {
			t.Fatalf("%s: got error %v", step, err)
		}
		st, ok := got[be.uid]
		if !ok || st.MemoryWorkingSet == nil || *st.MemoryWorkingSet != be.ws {
			t.Fatalf("%s: pod stats %s, want its working set %d", step, dumpStats(got), be.ws)
		}
		if !reflect.DeepEqual(st.Containers, want) {
			t.Errorf("%s: containers %s, want %s", step, dumpStats(got), dumpStats(map[string]signals.PodStats{be.uid: {Containers: want}}))
		}
		open := openUnder(t, cgroup)
		if len(open) != wantOpen || r.files.open != wantOpen {
			t.Errorf("%s: %d files open under the tree (reader counts %d), want %d: %v", step, len(open), r.files.open, wantOpen, open)
		}
	}

	read("not made yet", pod, nil, 2)
	writeContainerCgroup(t, filepath.Join(podDir, first), false, 50<<20, 0)
	read("made since", pod, []signals.ContainerStats{ctrWS("app", 50<<20)}, 4)
	writeContainerCgroup(t, filepath.Join(podDir, first), false, 80<<20, 0)
	read("grown, same files", pod, []signals.ContainerStats{ctrWS("app", 80<<20)}, 4)

	writeContainerCgroup(t, filepath.Join(podDir, second), false, 5<<20, 0)
	restarted := pod
	restarted.Containers = []signals.Container{{Name: "app", ID: second}}
	read("restarted", restarted, []signals.ContainerStats{ctrWS("app", 5<<20)}, 4)
	for _, path := range openUnder(t, cgroup) {
		if strings.Contains(path, "/"+first+"/") {
			t.Errorf("restarted: the old instance's %s still open", path)
		}
	}

	edit(t, cgroup, map[string]*string{filepath.Join(layout.podDir, second, "memory.stat"): str("total_inactive_file x\n")})
	read("garbled", restarted, nil, 2)
	writeContainerCgroup(t, filepath.Join(podDir, second), false, 6<<20, 0)
	read("mended", restarted, []signals.ContainerStats{ctrWS("app", 6<<20)}, 4)

	unlisted := pod
	unlisted.Containers = []signals.Container{{Name: "app"}}
	read("no longer reported", unlisted, nil, 2)

	read("reported again", restarted, []signals.ContainerStats{ctrWS("app", 6<<20)}, 4)
	if _, err := r.Read(context.Background(), nil, now, signals.PodMemory); err != nil {
		t.Fatal(err)
	}
	if open := openUnder(t, cgroup); len(open) != 0 || r.files.open != 0 {
		t.Errorf("pod gone: %d files open (reader counts %d): %v", len(open), r.files.open, open)
	}
}

// TestContainerDir: a container's cgroup is found by its ID as each driver
// and runtime name it, a directory and only below the pod's; an ID that
// is not one name finds nothing.
func TestContainerDir(t *testing.T) {
	const id = "c0ffee"
	tests := []struct {
		name   string
		make   []string // directories below the pod's; "f:" a file
		id     string
		want   string
		wantOK bool
	}{
		{"cgroupfs", []string{id}, id, id, true},
		{"containerd under systemd", []string{"cri-containerd-" + id + ".scope"}, id, "cri-containerd-" + id + ".scope", true},
		{"CRI-O under systemd", []string{"crio-" + id + ".scope"}, id, "crio-" + id + ".scope", true},
		{"CRI-O with cgroupfs", []string{"crio-" + id}, id, "crio-" + id, true},
		{"docker", []string{"docker-" + id + ".scope"}, id, "docker-" + id + ".scope", true},
		{"the exact name first", []string{"crio-" + id, id}, id, id, true},
		// CRI-O with conmon_cgroup "pod": conmon's cgroup beside the
		// container's. The directory lists conmon's first for an ID
		// starting with d, e or f ("crio-conmon-f00d" < "crio-f00d"),
		// after for c0ffee ("crio-c0" < "crio-co"): both orders.
		{"CRI-O's conmon under systemd, listed before", []string{"crio-conmon-f00d.scope", "crio-f00d.scope"}, "f00d", "crio-f00d.scope", true},
		{"CRI-O's conmon under systemd, listed after", []string{"crio-conmon-" + id + ".scope", "crio-" + id + ".scope"}, id, "crio-" + id + ".scope", true},
		{"CRI-O's conmon with cgroupfs", []string{"crio-conmon-f00d", "crio-f00d"}, "f00d", "crio-f00d", true},
		{"conmon's alone is not the container's", []string{"crio-conmon-" + id + ".scope", "crio-conmon-" + id}, id, "", false},
		{"a bare conmon name", []string{"conmon-" + id}, id, "", false},
		{"no runtime part", []string{"-" + id + ".scope"}, id, "", false},
		{"another container's", []string{"cri-containerd-beef.scope", "beef"}, id, "", false},
		{"an ID's tail is not the ID", []string{"cri-containerd-x" + id + ".scope"}, id, "", false},
		{"a file is no cgroup", []string{"f:" + id, "f:cri-containerd-" + id + ".scope"}, id, "", false},
		{"none yet", nil, id, "", false},
		{"dot-dot", []string{"x"}, "..", "", false},
		{"a path", []string{"a/b"}, "a/b", "", false},
		{"empty", []string{"x"}, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := filepath.Join(t.TempDir(), "pod")
			for _, m := range tc.make {
				if f, ok := strings.CutPrefix(m, "f:"); ok {
					if err := os.MkdirAll(pod, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(pod, f), nil, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Join(pod, m), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dir, ok := containerDir(pod, tc.id)
			want := ""
			if tc.wantOK {
				want = filepath.Join(pod, tc.want)
			}
			if dir != want || ok != tc.wantOK {
				t.Errorf("containerDir(%q) = %q, %v; want %q, %v", tc.id, dir, ok, want, tc.wantOK)
			}
		})
	}
}
