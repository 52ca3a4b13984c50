package reclaim

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// fakeCRI is a runtime and image service in memory that records the calls
// it gets and fails the methods given errors with InjectError.
type fakeCRI struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	images     []*runtimeapi.Image
	calls      []string
	errs       map[string]error
}

func (f *fakeCRI) InjectError(method string, err error) {
	if f.errs == nil {
		f.errs = map[string]error{}
	}
	f.errs[method] = err
}

func (f *fakeCRI) call(method, arg string) error {
	f.calls = append(f.calls, strings.TrimSpace(method+" "+arg))
	return f.errs[method]
}

func (f *fakeCRI) ListPodSandbox(_ context.Context, _ *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := f.call("ListPodSandbox", ""); err != nil {
		return nil, err
	}
	return slices.Clone(f.sandboxes), nil
}

func (f *fakeCRI) StopPodSandbox(_ context.Context, id string) error {
	if err := f.call("StopPodSandbox", id); err != nil {
		return err
	}
	for _, s := range f.sandboxes {
		if s.Id == id {
			s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		}
	}
	return nil
}

func (f *fakeCRI) RemovePodSandbox(_ context.Context, id string) error {
	if err := f.call("RemovePodSandbox", id); err != nil {
		return err
	}
	f.sandboxes = slices.DeleteFunc(f.sandboxes, func(s *runtimeapi.PodSandbox) bool { return s.Id == id })
	f.containers = slices.DeleteFunc(f.containers, func(c *runtimeapi.Container) bool { return c.PodSandboxId == id })
	return nil
}

func (f *fakeCRI) ListContainers(_ context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := f.call("ListContainers", ""); err != nil {
		return nil, err
	}
	return slices.Clone(f.containers), nil
}

func (f *fakeCRI) RemoveContainer(_ context.Context, id string) error {
	if err := f.call("RemoveContainer", id); err != nil {
		return err
	}
	f.containers = slices.DeleteFunc(f.containers, func(c *runtimeapi.Container) bool { return c.Id == id })
	return nil
}

func (f *fakeCRI) ListImages(_ context.Context, _ *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := f.call("ListImages", ""); err != nil {
		return nil, err
	}
	return slices.Clone(f.images), nil
}

func (f *fakeCRI) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	if err := f.call("RemoveImage", spec.Image); err != nil {
		return err
	}
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.Id == spec.Image })
	return nil
}

func sandbox(id string, ready bool, created int64) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{Id: id, State: st, CreatedAt: created,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: id, Namespace: "default", Uid: id + "-uid"}}
}

func container(id, sandbox, name string, attempt uint32, st runtimeapi.ContainerState, image string) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: st, CreatedAt: int64(attempt),
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: image}, ImageRef: image}
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPlan(t *testing.T) {
	both, ctrs, imgs := []decide.ReclaimKind{decide.ReclaimContainers, decide.ReclaimImages}, []decide.ReclaimKind{decide.ReclaimContainers}, []decide.ReclaimKind{decide.ReclaimImages}
	tests := []struct {
		layout signals.FsLayout
		sig    signals.Signal
		want   []decide.ReclaimKind
	}{
		{signals.SingleFs, signals.NodeFsAvailable, both},
		{signals.SingleFs, signals.NodeFsInodesFree, both},
		{signals.SingleFs, signals.ImageFsAvailable, both},
		{signals.SingleFs, signals.ContainerFsInodesFree, both},
		{signals.DedicatedImageFs, signals.NodeFsAvailable, ctrs},
		{signals.DedicatedImageFs, signals.NodeFsInodesFree, ctrs},
		{signals.DedicatedImageFs, signals.ImageFsAvailable, both},
		{signals.DedicatedImageFs, signals.ImageFsInodesFree, both},
		{signals.DedicatedImageFs, signals.ContainerFsAvailable, both},
		{signals.SplitImageFs, signals.NodeFsAvailable, ctrs},
		{signals.SplitImageFs, signals.ContainerFsAvailable, ctrs},
		{signals.SplitImageFs, signals.ContainerFsInodesFree, ctrs},
		{signals.SplitImageFs, signals.ImageFsAvailable, imgs},
		{signals.SplitImageFs, signals.ImageFsInodesFree, imgs},
	}
	for _, tt := range tests {
		t.Run(tt.layout.String()+"/"+string(tt.sig), func(t *testing.T) {
			got, err := Plan(tt.sig, tt.layout)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Plan = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for _, sig := range []signals.Signal{signals.MemoryAvailable, signals.PIDAvailable, "bogus"} {
		if got, err := Plan(sig, signals.SingleFs); err == nil {
			t.Errorf("Plan(%s) = %q, want an error: not a disk signal", sig, got)
		}
	}
	if got, err := Plan(signals.NodeFsAvailable, signals.FsLayout(7)); err == nil {
		t.Errorf("Plan with layout 7 = %q, want an error", got)
	}
}

// TestReclaimOrder runs Reclaim on a node with a dead container and an
// unused image and checks which kinds run, in which order, and where each
// is measured.
func TestReclaimOrder(t *testing.T) {
	tests := []struct {
		layout      signals.FsLayout
		sig         signals.Signal
		wantKinds   []decide.ReclaimKind
		wantMeasure []string // paths, before and after each kind
	}{
		{signals.SingleFs, signals.NodeFsAvailable, []decide.ReclaimKind{"containers", "images"}, []string{"/node", "/node", "/image", "/image"}},
		{signals.DedicatedImageFs, signals.NodeFsAvailable, []decide.ReclaimKind{"containers"}, []string{"/node", "/node"}},
		{signals.DedicatedImageFs, signals.ImageFsAvailable, []decide.ReclaimKind{"containers", "images"}, []string{"/image", "/image", "/image", "/image"}},
		{signals.DedicatedImageFs, signals.ContainerFsInodesFree, []decide.ReclaimKind{"containers", "images"}, []string{"/image", "/image", "/image", "/image"}},
		{signals.SplitImageFs, signals.ContainerFsAvailable, []decide.ReclaimKind{"containers"}, []string{"/node", "/node"}},
		{signals.SplitImageFs, signals.ImageFsAvailable, []decide.ReclaimKind{"images"}, []string{"/image", "/image"}},
	}
	for _, tt := range tests {
		t.Run(tt.layout.String()+"/"+string(tt.sig), func(t *testing.T) {
			cri := &fakeCRI{
				sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", true, 1)},
				containers: []*runtimeapi.Container{
					container("c0", "gone", "app", 0, exited, "sha256:a"),
					container("c1", "s1", "app", 1, running, "sha256:b"),
				},
				images: []*runtimeapi.Image{{Id: "sha256:a"}, {Id: "sha256:b"}, {Id: "sha256:c"}},
			}
			avail := map[string]int64{"/node": 1000, "/image": 5000}
			var measured []string
			measure := func(p string) (int64, error) {
				measured = append(measured, p)
				avail[p] += 100 // each reading sees 100 bytes more
				return avail[p], nil
			}
			r := New(Config{NodeFsPath: "/node", ImageFsPath: "/image", Measure: measure, Settle: -1}, cri, cri, quiet())
			actions, err := r.Reclaim(t.Context(), tt.sig, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			// The dead container c0 goes, and with it the last use of
			// sha256:a: images then removes sha256:a and sha256:c, or only
			// sha256:c when no containers were removed; sha256:b is in use.
			want := map[decide.ReclaimKind]int{decide.ReclaimContainers: 1, decide.ReclaimImages: 1}
			if slices.Contains(tt.wantKinds, decide.ReclaimContainers) {
				want[decide.ReclaimImages] = 2
			}
			var kinds []decide.ReclaimKind
			for _, a := range actions {
				kinds = append(kinds, a.Kind)
				if a.Err != nil || a.Removed != want[a.Kind] || a.FreedBytes != 100 {
					t.Errorf("action %+v, want removed %d, freed 100, no error", a, want[a.Kind])
				}
			}
			if !slices.Equal(kinds, tt.wantKinds) {
				t.Errorf("kinds %q, want %q (calls %q)", kinds, tt.wantKinds, cri.calls)
			}
			if !slices.Equal(measured, tt.wantMeasure) {
				t.Errorf("measured %q, want %q", measured, tt.wantMeasure)
			}
			// Containers go before images: an image is removed only after
			// the dead container of it.
			rc, ri := slices.Index(cri.calls, "RemoveContainer c0"), slices.Index(cri.calls, "RemoveImage sha256:a")
			if slices.Contains(tt.wantKinds, "containers") && slices.Contains(tt.wantKinds, "images") && (rc < 0 || ri < rc) {
				t.Errorf("calls %q: want RemoveContainer c0 before RemoveImage sha256:a", cri.calls)
			}
		})
	}
}

// TestReclaimFaults injects CRI errors: a failing kind carries its error and
// the next kind still runs; one failing removal does not stop the others.
func TestReclaimFaults(t *testing.T) {
	boom := errors.New("rpc error: code = Unavailable")
	node := func() *fakeCRI {
		return &fakeCRI{
			sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", true, 1), sandbox("s2", false, 2)},
			containers: []*runtimeapi.Container{
				container("c0", "gone", "app", 0, exited, "sha256:a"),
				container("c1", "gone", "app", 1, exited, "sha256:a"),
				container("run", "s1", "app", 0, running, "sha256:used"),
			},
			images: []*runtimeapi.Image{{Id: "sha256:b"}, {Id: "sha256:c"}, {Id: "sha256:used"}},
		}
	}
	tests := []struct {
		name          string
		method        string
		wantCtrs      int
		wantCtrsErr   string
		wantImages    int
		wantImagesErr string
	}{
		{"list sandboxes", "ListPodSandbox", 0, "list pod sandboxes", 2, ""},
		{"remove container", "RemoveContainer", 1, "remove container", 2, ""}, // the sandbox s2 still goes
		{"stop sandbox", "StopPodSandbox", 2, "stop pod sandbox s2", 2, ""},
		{"remove sandbox", "RemovePodSandbox", 2, "remove pod sandbox s2", 2, ""},
		{"list images", "ListImages", 3, "", 0, "list images"},
		{"remove image", "RemoveImage", 3, "", 0, "remove image sha256:b"},
		{"list containers", "ListContainers", 0, "list containers", 0, "list containers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cri := node()
			cri.InjectError(tt.method, boom)
			r := New(Config{NodeFsPath: "/node", Measure: func(string) (int64, error) { return 0, nil }, Settle: -1}, cri, cri, quiet())
			actions, err := r.Reclaim(t.Context(), signals.NodeFsAvailable, signals.SingleFs)
			if err != nil || len(actions) != 2 {
				t.Fatalf("Reclaim = %+v, %v; want two actions", actions, err)
			}
			check := func(a decide.ReclaimAction, kind decide.ReclaimKind, removed int, wantErr string) {
				t.Helper()
				if a.Kind != kind || a.Removed != removed {
					t.Errorf("action %s removed %d, want %s removed %d", a.Kind, a.Removed, kind, removed)
				}
				switch {
				case wantErr == "" && a.Err != nil:
					t.Errorf("%s: error %v, want none", kind, a.Err)
				case wantErr != "" && (a.Err == nil || !strings.Contains(a.Err.Error(), wantErr) || !errors.Is(a.Err, boom)):
					t.Errorf("%s: error %v, want one saying %q and wrapping the CRI's", kind, a.Err, wantErr)
				}
			}
			check(actions[0], decide.ReclaimContainers, tt.wantCtrs, tt.wantCtrsErr)
			check(actions[1], decide.ReclaimImages, tt.wantImages, tt.wantImagesErr)
		})
	}
}

func TestReclaimNegativeFreedIsZero(t *testing.T) {
	cri := &fakeCRI{}
	avail := int64(1000)
	r := New(Config{NodeFsPath: "/node", Measure: func(string) (int64, error) { avail -= 10; return avail, nil }, Settle: -1}, cri, cri, quiet())
	actions, err := r.Reclaim(t.Context(), signals.NodeFsAvailable, signals.SplitImageFs)
	if err != nil || len(actions) != 1 || actions[0].FreedBytes != 0 {
		t.Errorf("Reclaim while the filesystem fills = %+v, %v; want one action freeing 0", actions, err)
	}
}

func TestPlanContainers(t *testing.T) {
	sandboxes := []*runtimeapi.PodSandbox{
		sandbox("ready", true, 1),
		sandbox("dead", false, 2),
		sandbox("dead-busy", false, 3),  // holds a container it reports running
		sandbox("dead-maybe", false, 4), // holds a container in state unknown
	}
	containers := []*runtimeapi.Container{
		container("app-0", "ready", "app", 0, exited, "i"),
		container("app-1", "ready", "app", 1, exited, "i"),
		container("app-2", "ready", "app", 2, exited, "i"), // newest exited app: kept
		container("app-3", "ready", "app", 3, running, "i"),
		container("init-0", "ready", "init", 0, exited, "i"), // only exited init: kept
		container("new", "ready", "side", 0, created, "i"),
		container("unk", "ready", "unk", 0, unknown, "i"),
		container("d-0", "dead", "app", 0, exited, "i"),
		container("d-1", "dead", "app", 1, exited, "i"),
		container("b-0", "dead-busy", "app", 0, running, "i"),
		container("b-1", "dead-busy", "app", 1, exited, "i"),
		container("m-0", "dead-maybe", "app", 0, unknown, "i"),
		container("orphan", "gone", "app", 0, exited, "i"),
		container("orphan-running", "gone", "x", 0, running, "i"),
	}
	p := planContainers(sandboxes, containers)
	var ctrs, sbs, busy []string
	for _, c := range p.containers {
		ctrs = append(ctrs, c.Id)
	}
	for _, s := range p.sandboxes {
		sbs = append(sbs, s.Id)
	}
	for _, s := range p.busy {
		busy = append(busy, s.Id)
	}
	if want := []string{"app-0", "orphan", "app-1"}; !slices.Equal(ctrs, want) {
		t.Errorf("containers %q, want %q", ctrs, want)
	}
	if want := []string{"dead"}; !slices.Equal(sbs, want) || p.inSandbox["dead"] != 2 {
		t.Errorf("sandboxes %q with %v containers, want %q with 2", sbs, p.inSandbox, want)
	}
	if want := []string{"dead-busy", "dead-maybe"}; !slices.Equal(busy, want) {
		t.Errorf("busy sandboxes %q, want %q", busy, want)
	}
}

func TestPlanImages(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	r := New(Config{NodeFsPath: "/", MinImageAge: 2 * time.Minute, SandboxImage: "pause:3.10", Clock: clk}, nil, nil, quiet())
	images := []*runtimeapi.Image{
		{Id: "sha256:by-id"},
		{Id: "sha256:by-tag", RepoTags: []string{"example.com/app:1"}},
		{Id: "sha256:by-digest", RepoDigests: []string{"example.com/db@sha256:d"}},
		{Id: "sha256:pinned", Pinned: true},
		{Id: "sha256:pause", RepoTags: []string{"docker.io/library/pause:3.10"}},
		{Id: "sha256:old"},
		{Id: "sha256:was-used"},
	}
	ctrs := []*runtimeapi.Container{
		container("a", "s", "a", 0, exited, "sha256:by-id"),
		{Id: "b", Image: &runtimeapi.ImageSpec{Image: "example.com/app:1"}},
		{Id: "c", ImageRef: "example.com/db@sha256:d"},
		{Id: "d", ImageId: "sha256:was-used"},
	}
	ids := func(imgs []*runtimeapi.Image) []string {
		var s []string
		for _, i := range imgs {
			s = append(s, i.Id)
		}
		return s
	}
	if v, young := r.planImages(images, ctrs, clk.Now()); len(v) != 0 || young != 1 {
		t.Errorf("first listing: victims %q, young %d; want none and 1 (sha256:old)", ids(v), young)
	}
	clk.SetTime(start.Add(time.Minute))
	images = append(images, &runtimeapi.Image{Id: "sha256:new"})
	ctrs = ctrs[:3] // the container of sha256:was-used is gone
	if v, young := r.planImages(images, ctrs, clk.Now()); len(v) != 0 || young != 3 {
		t.Errorf("a minute on: victims %q, young %d; want none and 3", ids(v), young)
	}
	clk.SetTime(start.Add(2 * time.Minute))
	// sha256:old was never used and seen first: it goes first; sha256:new
	// is one minute old and stays.
	if v, young := r.planImages(images, ctrs, clk.Now()); !slices.Equal(ids(v), []string{"sha256:old", "sha256:was-used"}) || young != 1 {
		t.Errorf("two minutes on: victims %q, young %d; want [sha256:old sha256:was-used] and 1", ids(v), young)
	}
	// An image no longer listed is forgotten; listed again, it is young.
	r.planImages(images[:1], nil, clk.Now())
	if v, young := r.planImages(images, ctrs, clk.Now()); len(v) != 0 || young != 3 {
		t.Errorf("after the images went and came back: victims %q, young %d; want none and 3", ids(v), young)
	}
}

func TestNormalizeRef(t *testing.T) {
	tests := map[string]string{
		"pause":                             "docker.io/library/pause:latest",
		"pause:3.10":                        "docker.io/library/pause:3.10",
		"rancher/pause:3.10":                "docker.io/rancher/pause:3.10",
		"registry.k8s.io/pause:3.10":        "registry.k8s.io/pause:3.10",
		"localhost/pause":                   "localhost/pause:latest",
		"localhost:5000/pause:1":            "localhost:5000/pause:1",
		"registry.k8s.io/pause@sha256:abcd": "registry.k8s.io/pause@sha256:abcd",
		"sha256:abcd":                       "sha256:abcd",
	}
	for in, want := range tests {
		if got := normalizeRef(in); got != want {
			t.Errorf("normalizeRef(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReclaimSettles: space freed by the runtime's garbage collector after
// the removal returned is counted, also when the collector runs more than a
// second later; the wait ends once space has come back and the filesystem
// has been quiet for a second since, or at Settle.
func TestReclaimSettles(t *testing.T) {
	tests := []struct {
		name      string
		settle    time.Duration
		readings  []int64 // before, after, then each poll; the last repeats
		wantFreed int64
		wantReads int
	}{
		{"late gc", 0, []int64{100, 100, 100, 100, 300}, 200, 2 + 3 + 10},
		{"nothing more", 0, []int64{100, 150}, 50, 2 + 10},
		{"gc more than a quiet second late (a busy node)", 0,
			[]int64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 300}, 200, 2 + 16 + 10},
		{"bounded", 500 * time.Millisecond, []int64{100, 100, 100, 100, 100, 100, 100, 100, 900}, 0, 2 + 5},
		{"no wait", -1, []int64{100, 100, 300}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			reads := 0
			measure := func(string) (int64, error) {
				v := tt.readings[min(reads, len(tt.readings)-1)]
				reads++
				return v, nil
			}
			cri := &fakeCRI{containers: []*runtimeapi.Container{container("c0", "gone", "app", 0, exited, "i")}}
			r := New(Config{NodeFsPath: "/node", Clock: clk, Measure: measure, Settle: tt.settle}, cri, cri, quiet())
			done := make(chan []decide.ReclaimAction)
			go func() {
				actions, _ := r.Reclaim(t.Context(), signals.NodeFsAvailable, signals.SplitImageFs)
				done <- actions
			}()
			for {
				select {
				case actions := <-done:
					if len(actions) != 1 || actions[0].FreedBytes != tt.wantFreed || reads != tt.wantReads {
						t.Errorf("Reclaim = %+v after %d readings; want freed %d after %d", actions, reads, tt.wantFreed, tt.wantReads)
					}
					return
				default:
				}
				if clk.HasWaiters() {
					clk.Step(settlePoll)
				} else {
					runtime.Gosched() // let the Reclaimer reach its next wait
				}
			}
		})
	}
}
