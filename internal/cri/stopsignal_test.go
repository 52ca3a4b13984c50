package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crioInfo is CRI-O's verbose ContainerStatus info (server/container_status.go,
// createContainerInfo): the sandbox, the container's PID, its runtime spec
// and whether it is privileged, as JSON under "info". The runtime spec
// carries org.opencontainers.image.stopSignal when the image has a
// STOPSIGNAL or the CRI config a stop_signal (container_create.go,
// setupContainerRuntimeAndStopSignal and SpecAddAnnotations).
func crioInfo(annotations string) map[string]string {
	return map[string]string{"info": `{"sandboxID":"4e1c0a","pid":4242,"runtimeSpec":{"ociVersion":"1.0.2-dev","process":{"args":["nginx"]},` +
		`"annotations":{"io.kubernetes.cri-o.ContainerType":"container"` + annotations + `}},"privileged":false}`}
}

// TestStopSignalOf: the stop signal read from the answers containerd and
// CRI-O give to a verbose ContainerStatus.
func TestStopSignalOf(t *testing.T) {
	running := func(sig runtimeapi.Signal, info map[string]string) *runtimeapi.ContainerStatusResponse {
		return &runtimeapi.ContainerStatusResponse{
			Status: &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StopSignal: sig},
			Info:   info,
		}
	}
	// containerd's verbose info has a runtime spec too, without the
	// annotation: it must not be read as CRI-O's "no STOPSIGNAL".
	containerdInfo := map[string]string{"info": `{"sandboxID":"4e1c0a","pid":4242,"snapshotter":"overlayfs","runtimeType":"io.containerd.runc.v2","runtimeSpec":{"ociVersion":"1.2.1","annotations":{"io.kubernetes.cri.container-type":"container"}}}`}
	tests := []struct {
		name    string
		runtime string
		resp    *runtimeapi.ContainerStatusResponse
		want    syscall.Signal
		wantOK  bool
		wantErr string
	}{
		// containerd 2.1 and later: the field, always set (the config's,
		// else the image's, else SIGTERM).
		{"containerd, image STOPSIGNAL SIGQUIT", "containerd", running(runtimeapi.Signal_SIGQUIT, containerdInfo), syscall.SIGQUIT, true, ""},
		{"containerd, no STOPSIGNAL", "containerd", running(runtimeapi.Signal_SIGTERM, containerdInfo), syscall.SIGTERM, true, ""},
		{"containerd, real-time signal", "containerd", running(runtimeapi.Signal_SIGRTMINPLUS1, nil), syscall.Signal(35), true, ""},
		{"containerd, SIGCLD", "containerd", running(runtimeapi.Signal_SIGCLD, nil), syscall.SIGCHLD, true, ""},
		// containerd before 2.1 leaves the field unset, yet sends its
		// image's STOPSIGNAL: not known.
		{"containerd 1.7", "containerd", running(runtimeapi.Signal_RUNTIME_DEFAULT, containerdInfo), 0, false, ""},
		{"a signal this cri-api does not name", "containerd", running(runtimeapi.Signal(99), nil), 0, false, "stop_signal 99"},
		// CRI-O leaves the field unset and names the signal in the spec.
		{"CRI-O, image STOPSIGNAL SIGQUIT", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo(`,"org.opencontainers.image.stopSignal":"SIGQUIT"`)), syscall.SIGQUIT, true, ""},
		{"CRI-O, STOPSIGNAL as a number", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo(`,"org.opencontainers.image.stopSignal":"10"`)), syscall.SIGUSR1, true, ""},
		{"CRI-O, CRI stop_signal with cri-api 0.37's name", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo(`,"org.opencontainers.image.stopSignal":"SIGNAL_SIGUSR2"`)), syscall.SIGUSR2, true, ""},
		{"CRI-O, no STOPSIGNAL: SIGTERM", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo("")), syscall.SIGTERM, true, ""},
		{"CRI-O setting the field, as a later one may", "cri-o", running(runtimeapi.Signal_SIGINT, crioInfo(`,"org.opencontainers.image.stopSignal":"SIGQUIT"`)), syscall.SIGINT, true, ""},
		{"CRI-O, no verbose info", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, nil), 0, false, ""},
		{"CRI-O, info without a runtime spec", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, map[string]string{"info": `{"pid":1}`}), 0, false, ""},
		{"CRI-O, info not JSON", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, map[string]string{"info": `{"pid":`}), 0, false, "verbose info"},
		{"CRI-O, unknown signal", "cri-o", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo(`,"org.opencontainers.image.stopSignal":"SIGBOGUS"`)), 0, false, `"SIGBOGUS"`},
		{"another runtime, field unset", "", running(runtimeapi.Signal_RUNTIME_DEFAULT, crioInfo(`,"org.opencontainers.image.stopSignal":"SIGQUIT"`)), 0, false, ""},
		{"no status", "cri-o", &runtimeapi.ContainerStatusResponse{}, 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := stopSignalOf(tc.runtime, tc.resp)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %v (%d), %v; want %v (%d), %v", got, int(got), ok, tc.want, int(tc.want), tc.wantOK)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseSignal: signals as images' STOPSIGNAL and the CRI's enum name
// them; anything else an error naming the input.
func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal // 0: an error
	}{
		{"SIGQUIT", syscall.SIGQUIT},
		{"quit", syscall.SIGQUIT},
		{" SIGTERM ", syscall.SIGTERM},
		{"9", syscall.SIGKILL},
		{"SIGNAL_SIGWINCH", syscall.SIGWINCH},
		{"SIGRTMIN", 34},
		{"SIGRTMIN+3", 37},
		{"RTMAX-1", 63},
		{"SIGRTMAX", 64},
		{"SIGRTMINPLUS1", 35},
		{"SIGRTMAXMINUS14", 50},
		{"SIGPOLL", syscall.SIGIO},
		{"SIGIOT", syscall.SIGABRT},
		{"0", 0},
		{"65", 0},
		{"-1", 0},
		{"SIGRTMIN+31", 0},
		{"SIGRTMIN3", 0},
		{"SIGRTMAX+1", 0},
		{"", 0},
		{"SIG", 0},
		{"SIGBOGUS", 0},
	}
	for _, tc := range tests {
		got, err := parseSignal(tc.in)
		if tc.want == 0 {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
				t.Errorf("parseSignal(%q) = %d, %v; want an error naming it", tc.in, int(got), err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSignal(%q) = %d, %v; want %d", tc.in, int(got), err, int(tc.want))
		}
	}
}

// TestStopSignalsLearn: the running containers' stop signals are asked
// once each, at most stopSignalLookups a listing; a failed answer is asked
// again at the next listing; a container no longer running is forgotten.
func TestStopSignalsLearn(t *testing.T) {
	asked := map[string]int{}
	failing := map[string]bool{"broken": true}
	status := func(_ context.Context, id string) (*runtimeapi.ContainerStatusResponse, error) {
		asked[id]++
		if failing[id] {
			return nil, errors.New("rpc error: code = Unavailable")
		}
		info := crioInfo("")
		if id == "quits" {
			info = crioInfo(`,"org.opencontainers.image.stopSignal":"SIGQUIT"`)
		}
		return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id}, Info: info}, nil
	}
	ctr := func(id string, state runtimeapi.ContainerState) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, State: state}
	}
	var s stopSignals
	listing := []*runtimeapi.Container{
		ctr("quits", runtimeapi.ContainerState_CONTAINER_RUNNING),
		ctr("terms", runtimeapi.ContainerState_CONTAINER_RUNNING),
		ctr("broken", runtimeapi.ContainerState_CONTAINER_RUNNING),
		ctr("exited", runtimeapi.ContainerState_CONTAINER_EXITED),
	}
	err := s.learn(t.Context(), runtimeCRIO, status, listing)
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("learn: %v, want the failed answer for broken", err)
	}
	for id, want := range map[string]syscall.Signal{"quits": syscall.SIGQUIT, "terms": syscall.SIGTERM} {
		if got, ok := s.get(id); !ok || got != want {
			t.Errorf("get(%s) = %v, %v; want %v", id, got, ok, want)
		}
	}
	for _, id := range []string{"broken", "exited", "unlisted"} {
		if got, ok := s.get(id); ok {
			t.Errorf("get(%s) = %v, known; want not known", id, got)
		}
	}
	if asked["exited"] != 0 {
		t.Errorf("an exited container was asked %d times", asked["exited"])
	}

	// The next listing: known ones are not asked again, the failed one
	// is; terms has gone and is forgotten.
	failing["broken"] = false
	if err := s.learn(t.Context(), runtimeCRIO, status, listing[:1:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.learn(t.Context(), runtimeCRIO, status, []*runtimeapi.Container{listing[0], listing[2]}); err != nil {
		t.Fatal(err)
	}
	if asked["quits"] != 1 || asked["terms"] != 1 || asked["broken"] != 2 {
		t.Errorf("asked %v, want quits and terms once, broken twice", asked)
	}
	if _, ok := s.get("terms"); ok {
		t.Error("terms, no longer running, still known")
	}
	if got, ok := s.get("broken"); !ok || got != syscall.SIGTERM {
		t.Errorf("get(broken) = %v, %v after its answer came; want SIGTERM", got, ok)
	}

	// A runtime that does not say is not asked again either.
	var d stopSignals
	none := func(_ context.Context, id string) (*runtimeapi.ContainerStatusResponse, error) {
		asked["containerd-"+id]++
		return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id}}, nil
	}
	for range 2 {
		if err := d.learn(t.Context(), "containerd", none, listing[:1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := d.get("quits"); ok || asked["containerd-quits"] != 1 {
		t.Errorf("containerd 1.7's answer: known %v, asked %d times; want not known, asked once", ok, asked["containerd-quits"])
	}

	// A listing of many new containers asks stopSignalLookups of them.
	var many []*runtimeapi.Container
	for i := range stopSignalLookups + 5 {
		many = append(many, ctr(fmt.Sprintf("m%d", i), runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	var m stopSignals
	n := 0
	count := func(ctx context.Context, id string) (*runtimeapi.ContainerStatusResponse, error) {
		n++
		return status(ctx, id)
	}
	if err := m.learn(t.Context(), runtimeCRIO, count, many); err != nil {
		t.Fatal(err)
	}
	if n != stopSignalLookups {
		t.Errorf("one listing asked %d, want %d", n, stopSignalLookups)
	}
	if err := m.learn(t.Context(), runtimeCRIO, count, many); err != nil {
		t.Fatal(err)
	}
	if n != stopSignalLookups+5 {
		t.Errorf("two listings asked %d, want %d", n, stopSignalLookups+5)
	}
	if _, ok := m.get(fmt.Sprintf("m%d", stopSignalLookups+4)); !ok {
		t.Error("the last container not known after the second listing")
	}
}
