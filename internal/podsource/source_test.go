package podsource

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
)

func TestActive(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name     string
		phase    v1.PodPhase
		deleting bool
		want     bool
	}{
		{name: "pending", phase: v1.PodPending, want: true},
		{name: "running", phase: v1.PodRunning, want: true},
		{name: "no phase yet", want: true},
		{name: "unknown", phase: v1.PodUnknown, want: true},
		{name: "succeeded", phase: v1.PodSucceeded, want: false},
		{name: "failed (evicted)", phase: v1.PodFailed, want: false},
		{name: "running but being deleted", phase: v1.PodRunning, deleting: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Status: v1.PodStatus{Phase: tt.phase}}
			if tt.deleting {
				pod.DeletionTimestamp = &now
			}
			if got := active(pod); got != tt.want {
				t.Errorf("active = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInFlight: a pod is one of evictd's evictions in flight when it is
// being deleted, has not finished, and carries evictd's DisruptionTarget
// condition, True.
func TestInFlight(t *testing.T) {
	now := metav1.Now()
	cond := func(status v1.ConditionStatus, reason string) v1.PodCondition {
		return v1.PodCondition{Type: v1.DisruptionTarget, Status: status, Reason: reason}
	}
	evictd := cond(v1.ConditionTrue, decide.DisruptionTargetReason)
	tests := []struct {
		name     string
		phase    v1.PodPhase
		deleting bool
		conds    []v1.PodCondition
		want     bool
	}{
		{name: "evicted by evictd, terminating", phase: v1.PodRunning, deleting: true, conds: []v1.PodCondition{evictd}, want: true},
		{name: "evicted by evictd, pending", phase: v1.PodPending, deleting: true, conds: []v1.PodCondition{evictd}, want: true},
		{name: "evicted by evictd, among other conditions", phase: v1.PodRunning, deleting: true,
			conds: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, evictd}, want: true},
		{name: "evicted by evictd, finished (Failed)", phase: v1.PodFailed, deleting: true, conds: []v1.PodCondition{evictd}},
		{name: "evicted by evictd, finished (Succeeded)", phase: v1.PodSucceeded, deleting: true, conds: []v1.PodCondition{evictd}},
		{name: "marked by evictd, not deleted (yet)", phase: v1.PodRunning, conds: []v1.PodCondition{evictd}},
		{name: "deleted by someone else", phase: v1.PodRunning, deleting: true},
		{name: "evicted through the Eviction API by someone else", phase: v1.PodRunning, deleting: true,
			conds: []v1.PodCondition{cond(v1.ConditionTrue, "EvictionByEvictionAPI")}},
		{name: "evicted by the kubelet", phase: v1.PodRunning, deleting: true,
			conds: []v1.PodCondition{cond(v1.ConditionTrue, "TerminationByKubelet")}},
		{name: "evictd's reason, condition False", phase: v1.PodRunning, deleting: true,
			conds: []v1.PodCondition{cond(v1.ConditionFalse, decide.DisruptionTargetReason)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Status: v1.PodStatus{Phase: tt.phase, Conditions: tt.conds}}
			if tt.deleting {
				pod.DeletionTimestamp = &now
			}
			if got := inFlight(pod); got != tt.want {
				t.Errorf("inFlight = %v, want %v", got, tt.want)
			}
			if active(pod) && inFlight(pod) {
				t.Errorf("both active and in flight")
			}
		})
	}
}

// nowhere is a real client for an address nothing listens on.
func nowhere(t *testing.T) *kubeclient.Client {
	t.Helper()
	c, err := kubeclient.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func TestSourceBadArguments(t *testing.T) {
	tests := []struct {
		name    string
		client  *kubeclient.Client
		node    string
		wantErr string
	}{
		{name: "no client", node: "n", wantErr: "no API server client"},
		{name: "no node name", client: nowhere(t), wantErr: "empty node name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.client, tt.node, 0, nil)
			if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
			if _, err := s.Pods(t.Context()); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Pods = %v, want an error containing %q", err, tt.wantErr)
			}
			if err := s.WaitForSync(t.Context()); err == nil {
				t.Errorf("WaitForSync = nil, want an error")
			}
			if s.HasSynced() {
				t.Errorf("HasSynced = true")
			}
			if got := s.InFlight(); got != nil {
				t.Errorf("InFlight = %v, want nil", got)
			}
		})
	}
}

// TestSourceBeforeFirstList: with the API server unreachable the Source
// cannot answer, says why, and stops cleanly.
func TestSourceBeforeFirstList(t *testing.T) {
	s := New(nowhere(t), "node-a", 0, nil)
	if _, err := s.Pods(t.Context()); err == nil || !strings.Contains(err.Error(), "pods of node node-a not listed yet") {
		t.Errorf("Pods before Run = %v, want not listed yet", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	expired, cancelWait := context.WithCancel(t.Context())
	cancelWait()
	err := s.WaitForSync(expired)
	if err == nil || !strings.Contains(err.Error(), "pods of node node-a not listed yet") {
		t.Errorf("WaitForSync = %v, want the pods named", err)
	}
	if _, err := s.Pods(t.Context()); err == nil {
		t.Errorf("Pods without a list = nil error")
	}
	if got := s.InFlight(); got != nil {
		t.Errorf("InFlight without a list = %v, want nil", got)
	}
	if pod, ok := s.CachedPod("shop", "web"); ok {
		t.Errorf("CachedPod without a list = %v, true; want none", pod)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
	if err := s.Run(t.Context()); err == nil {
		t.Errorf("second Run = nil, want an error")
	}
}

// TestSlimKeepsWhatEvictdReads: a slimmed pod converts, filters and
// matches budgets as the whole pod does, and has lost the parts evictd
// never reads.
func TestSlimKeepsWhatEvictdReads(t *testing.T) {
	grace, prio := int64(45), int32(2000)
	always := v1.ContainerRestartPolicyAlways
	now := metav1.Now()
	deleted := metav1.NewTime(now.Add(45 * time.Second))
	big := func(name string, req, lim v1.ResourceList) v1.Container {
		return v1.Container{
			Name: name, Image: "registry.example/" + name + ":1", Command: []string{"/bin/" + name}, Args: []string{"--serve"},
			Env:            []v1.EnvVar{{Name: "MODE", Value: "prod"}},
			Ports:          []v1.ContainerPort{{ContainerPort: 8080}},
			VolumeMounts:   []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
			Resources:      v1.ResourceRequirements{Requests: req, Limits: lim},
			ReadinessProbe: &v1.Probe{PeriodSeconds: 3},
		}
	}
	side := big("envoy", rl("memory", "64Mi"), rl("memory", "128Mi", "ephemeral-storage", "1Gi"))
	side.RestartPolicy = &always
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "web-1", UID: "u-42", ResourceVersion: "7", Labels: map[string]string{"app": "web"},
			DeletionTimestamp: &deleted,
			Annotations: map[string]string{
				configSourceAnnotation: "file", configMirrorAnnotation: "abc",
				lastAppliedAnnotation: `{"kind":"Pod"}`,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "web", UID: "d-1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: v1.PodSpec{
			Priority: &prio, TerminationGracePeriodSeconds: &grace, NodeName: "node-a",
			Overhead:       rl("memory", "10Mi"),
			InitContainers: []v1.Container{side, big("migrate", rl("memory", "512Mi"), nil)},
			Containers: []v1.Container{
				big("app", rl("cpu", "1", "memory", "256Mi", "ephemeral-storage", "1Gi"), rl("ephemeral-storage", "2Gi")),
				big("log", rl("memory", "32Mi"), nil),
			},
			Volumes: []v1.Volume{
				{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("100Mi"))}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}},
			},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, PodIP: "10.0.0.7",
			Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: decide.DisruptionTargetReason, LastTransitionTime: now,
					Message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi."},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "app", Ready: true, ImageID: "sha256:1", ContainerID: "containerd://a1b2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}},
				{Name: "log", Ready: true, ContainerID: "containerd://c3d4", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}},
			},
			InitContainerStatuses: []v1.ContainerStatus{
				{Name: "envoy", ContainerID: "containerd://e5f6", RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}},
				{Name: "migrate", ContainerID: "containerd://0077", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
			},
		},
	}
	whole := pod.DeepCopy()
	got, err := slim(pod)
	if err != nil {
		t.Fatalf("slim: %v", err)
	}
	slimmed := got.(*v1.Pod)
	if c, w := Convert(slimmed), Convert(whole); !reflect.DeepEqual(c, w) {
		t.Errorf("Convert(slim(pod)) =\n%+v\nwant Convert(pod) =\n%+v", c, w)
	}
	if a, w := active(slimmed), active(whole); a != w {
		t.Errorf("active(slim(pod)) = %v, want %v", a, w)
	}
	if f, w := inFlight(slimmed), inFlight(whole); f != w || !w {
		t.Errorf("inFlight(slim(pod)) = %v, want %v (true)", f, w)
	}
	wantConds := []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: decide.DisruptionTargetReason, LastTransitionTime: now}}
	if got := slimmed.Status.Conditions; !reflect.DeepEqual(got, wantConds) {
		t.Errorf("conditions after slim = %+v, want only DisruptionTarget's type, status, reason and transition time %+v", got, wantConds)
	}
	// Written Failed by evictd before its containers stop (internal/evict):
	// in flight until the kubelet reports them stopped.
	failed := whole.DeepCopy()
	failed.DeletionTimestamp = nil
	failed.Status.Phase = v1.PodFailed
	failedSlim, err := slim(failed.DeepCopy())
	if err != nil {
		t.Fatalf("slim: %v", err)
	}
	if f, w := inFlight(failedSlim.(*v1.Pod)), inFlight(failed); f != w || !w {
		t.Errorf("inFlight(slim(Failed pod with a running container)) = %v, want %v (true)", f, w)
	}
	f := inFlightOf(failedSlim.(*v1.Pod))
	if want := now.Add(45 * time.Second); !f.DeletionTimestamp.Equal(want) || f.DeletionGracePeriod != 45*time.Second {
		t.Errorf("in flight as %+v, want until %s (the condition's transition plus the pod's grace period of 45s)", f, want)
	}
	failed.Status.ContainerStatuses = nil
	failed.Status.InitContainerStatuses = failed.Status.InitContainerStatuses[1:]
	if inFlight(failed) {
		t.Errorf("inFlight(Failed pod with no running container) = true, want false")
	}
	if slimmed.ResourceVersion != "7" {
		t.Errorf("resourceVersion = %q, want 7", slimmed.ResourceVersion)
	}
	// Of the containers' statuses only the names and IDs stay: the
	// readers find each container's cgroup by its ID.
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	wantStatuses := []v1.ContainerStatus{{Name: "app", ContainerID: "containerd://a1b2", State: running}, {Name: "log", ContainerID: "containerd://c3d4", State: running}}
	if got := slimmed.Status.ContainerStatuses; !reflect.DeepEqual(got, wantStatuses) {
		t.Errorf("container statuses after slim = %+v, want only names, IDs and running %+v", got, wantStatuses)
	}
	wantInit := []v1.ContainerStatus{{Name: "envoy", ContainerID: "containerd://e5f6", State: running}, {Name: "migrate", ContainerID: "containerd://0077"}}
	if got := slimmed.Status.InitContainerStatuses; !reflect.DeepEqual(got, wantInit) {
		t.Errorf("init container statuses after slim = %+v, want only names, IDs and running %+v", got, wantInit)
	}
	if ids := containerIDs(Convert(slimmed)); !reflect.DeepEqual(ids, map[string]string{"app": "a1b2", "log": "c3d4", "envoy": "e5f6"}) {
		t.Errorf("container IDs of the slimmed pod = %v, want the running containers'", ids)
	}
	for what, gone := range map[string]bool{
		"managedFields":            slimmed.ManagedFields == nil,
		"last-applied annotation":  slimmed.Annotations[lastAppliedAnnotation] == "",
		"container images":         slimmed.Spec.Containers[0].Image == "" && slimmed.Spec.InitContainers[1].Image == "",
		"container env and probes": slimmed.Spec.Containers[1].Env == nil && slimmed.Spec.Containers[1].LivenessProbe == nil,
		"container status details": slimmed.Status.ContainerStatuses[0].ImageID == "" && !slimmed.Status.ContainerStatuses[0].Ready,
		"pod IP":                   slimmed.Status.PodIP == "",
	} {
		if !gone {
			t.Errorf("slim kept the %s", what)
		}
	}
}

// TestSourceKeepsOnlyItsNodesPods: an API server that ignores the field
// selector and answers with every pod of the cluster (a fault injected
// here; a real one honours it) cannot make evictd rank or wait for
// another node's pods.
func TestSourceKeepsOnlyItsNodesPods(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, deleting bool) v1.Pod {
		p := v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "5"},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app"}}},
			Status:     v1.PodStatus{Phase: v1.PodRunning},
		}
		if deleting {
			p.DeletionTimestamp = &now
			p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: decide.DisruptionTargetReason}}
		}
		return p
	}
	list := v1.PodList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "10"},
		Items: []v1.Pod{
			pod("mine", "node-a", false), pod("theirs", "node-b", false),
			pod("mine-leaving", "node-a", true), pod("theirs-leaving", "node-b", true),
			pod("unbound", "", false),
		},
	}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch q := r.URL.Query(); {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			http.Error(w, "watch-list not served here", http.StatusBadRequest)
		case q.Get("watch") == "true":
			<-r.Context().Done() // a watch that never sees a change
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body) // the field selector ignored
		}
	}))
	defer srv.Close()
	c, err := kubeclient.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	s := New(c, "node-a", 0, slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if err := s.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	pods, err := s.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := refs(pods); !reflect.DeepEqual(got, []string{"shop/mine"}) {
		t.Errorf("Pods = %q, want only shop/mine", got)
	}
	var inFlight []string
	for _, f := range s.InFlight() {
		inFlight = append(inFlight, f.Ref())
	}
	if !reflect.DeepEqual(inFlight, []string{"shop/mine-leaving"}) {
		t.Errorf("InFlight = %q, want only shop/mine-leaving", inFlight)
	}
	for _, tc := range []struct {
		name   string
		want   bool
		delete bool
	}{
		{"mine", true, false},
		{"mine-leaving", true, true},
		{"theirs", false, false},
		{"theirs-leaving", false, false},
		{"unbound", false, false},
		{"never-listed", false, false},
	} {
		pod, ok := s.CachedPod("shop", tc.name)
		switch {
		case ok != tc.want:
			t.Errorf("CachedPod(shop, %s) found %v, want %v", tc.name, ok, tc.want)
		case ok && (string(pod.UID) != tc.name+"-uid" || (pod.DeletionTimestamp != nil) != tc.delete):
			t.Errorf("CachedPod(shop, %s) = UID %s, deletionTimestamp %v; want UID %s-uid, being deleted %v",
				tc.name, pod.UID, pod.DeletionTimestamp, tc.name, tc.delete)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"shop/theirs", "shop/theirs-leaving", "shop/unbound"} {
		if !strings.Contains(logged.String(), "pod="+name+" ") {
			t.Errorf("no log line names %s, a pod bound to another node; log:\n%s", name, logged.String())
		}
	}
}

// lockedWriter serialises the writes of a logger shared by goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
