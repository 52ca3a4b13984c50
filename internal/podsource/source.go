package podsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/signals"
)

// lastAppliedAnnotation is where kubectl apply keeps the whole object it
// last applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Source lists this node's pods from an informer's cache. Build it with
// New, start it with Run; Pods answers once the first list has arrived and
// from then on keeps answering from the cache, also while the API server is
// unreachable.
type Source struct {
	nodeName string
	log      *slog.Logger
	client   *kubeclient.Client
	resync   time.Duration

	// cur is the informer Pods and the others read; a relist replaces it
	// with a new one once that one has listed.
	cur      atomic.Pointer[podCache]
	setupErr error

	started atomic.Bool
	relistC chan string // a relist asked for, with its reason
	// answered, when set, says when the API server last answered evictd
	// otherwise (its Lease renewals): a watch silent while it answers is
	// stale. onRelisted, when set, is called after each relist.
	answered   func() time.Time
	onRelisted func()
	relists    atomic.Int64
	maxSilence time.Duration // MaxSilence; shorter in tests

	mu       sync.Mutex
	watchErr map[string]string // last watch error logged, by resource
	uidOf    func() types.UID  // the Node's UID, "" when unknown
	// trustedDS holds the namespaces whose DaemonSet pods rank after the
	// other pods of their tier (SetTrustedDaemonSetNamespaces).
	trustedDS map[string]bool

	// changed is closed and replaced each time the cache takes in a
	// change of a pod (Changed).
	changedMu sync.Mutex
	changed   chan struct{}
}

// Changed returns a channel closed at the next change of one of the
// node's pods the cache takes in (added, updated or deleted), for a wait
// that must see a pod's next state at once rather than at its next look.
func (s *Source) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// noteChange closes the channel Changed gave out, if any.
func (s *Source) noteChange() {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// SetNodeUID gives the Source the UID of its node's Node object (from a
// watch of it), which a mirror pod's ownerReference must name. Call it
// before Run.
func (s *Source) SetNodeUID(uid func() types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uidOf = uid
}

// SetTrustedDaemonSetNamespaces names the namespaces whose DaemonSet pods
// keep the ranking's DaemonSet rule (after the other pods of their tier):
// whoever may create a DaemonSet there is trusted with a later place in
// the ranking. A DaemonSet pod of any other namespace ranks as any other
// pod, so a tenant allowed to create DaemonSets cannot buy its pods a later
// turn. None: no DaemonSet pod is set apart. Call it before Run.
func (s *Source) SetTrustedDaemonSetNamespaces(namespaces []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trustedDS = make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		s.trustedDS[ns] = true
	}
}

// nodeUID returns the Node's UID, or "" when it is not known.
func (s *Source) nodeUID() types.UID {
	s.mu.Lock()
	f := s.uidOf
	s.mu.Unlock()
	if f == nil {
		return ""
	}
	return f()
}

// New returns a Source for the pods bound to nodeName (field selector
// spec.nodeName=<nodeName>), read through client. It watches nothing else:
// the Eviction API enforces PodDisruptionBudgets itself. resync is the informers' resync period
// (0 or less: none). A nil log discards. Errors in the arguments are
// reported by Run.
func New(client *kubeclient.Client, nodeName string, resync time.Duration, log *slog.Logger) *Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		nodeName:   nodeName,
		log:        log.With("component", "podsource", "node", nodeName),
		watchErr:   map[string]string{},
		client:     client,
		resync:     max(resync, 0),
		relistC:    make(chan string, 1),
		maxSilence: MaxSilence,
	}
	switch {
	case client == nil:
		s.setupErr = errors.New("podsource: no API server client")
		return s
	case nodeName == "":
		// spec.nodeName= would list every pod not yet scheduled.
		s.setupErr = errors.New("podsource: empty node name")
		return s
	}
	c, err := s.newCache()
	s.setupErr = err
	s.cur.Store(c)
	return s
}

// podCache is one informer of the node's pods and its lister.
type podCache struct {
	inf    cache.SharedIndexInformer
	lister corelisters.PodLister
	// heard is when the informer last heard from the API server (a list
	// or any watch event, bookmarks included), Unix nanoseconds; 0: never.
	heard atomic.Int64
}

// lastHeard returns when c last heard from the API server, the zero time
// if never.
func (c *podCache) lastHeard() time.Time {
	if n := c.heard.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// newCache builds an informer of the node's pods, not started.
func (s *Source) newCache() (*podCache, error) {
	c := &podCache{}
	onNode := fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String()
	c.inf = kubeclient.NewInformer(s.client.Pods(""), &v1.Pod{}, s.resync, func(o *metav1.ListOptions) { o.FieldSelector = onNode },
		func() { c.heard.Store(time.Now().UnixNano()) })
	c.lister = corelisters.NewPodLister(c.inf.GetIndexer())

	// These calls fail only on an informer already started; this one is new.
	err := errors.Join(
		c.inf.SetTransform(slim),
		c.inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { s.watchFailed("pods", err) }))
	_, herr := c.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.noteOddities(obj); s.noteChange() },
		UpdateFunc: func(old, cur any) {
			if o, ok := old.(*v1.Pod); !ok || o.ResourceVersion != podVersion(cur) {
				s.noteOddities(cur)
				s.noteChange()
			}
		},
		DeleteFunc: func(any) { s.noteChange() },
	})
	return c, errors.Join(err, herr)
}

// SetStaleness gives the Source what it needs to find its watch stale:
// answered says when the API server last answered evictd otherwise (nil:
// never known, so a silent watch is never taken for stale), and
// onRelisted, if not nil, is called after each relist (the loop looks at
// the new list at once). Call it before Run.
func (s *Source) SetStaleness(answered func() time.Time, onRelisted func()) {
	s.answered, s.onRelisted = answered, onRelisted
}

// Relist asks Run to list the node's pods afresh into a new cache, which
// replaces the current one once it has listed; the current one answers
// meanwhile. The loop asks for it when the API server says a pod the cache
// lists is gone. It does not wait; a relist already asked for covers it.
func (s *Source) Relist(reason string) {
	select {
	case s.relistC <- reason:
	default:
	}
}

// Relists returns how many relists have replaced the cache.
func (s *Source) Relists() int64 { return s.relists.Load() }

// LastHeard returns when the current cache last heard from the API server
// (a list, or any watch event, bookmarks included); the zero time if never.
func (s *Source) LastHeard() time.Time {
	if c := s.cur.Load(); c != nil {
		return c.lastHeard()
	}
	return time.Time{}
}

// MaxSilence is how long the watch of the node's pods may bring nothing,
// not even a bookmark, while the API server answers evictd's other
// requests, before the Source takes it for stale and relists. On a quiet
// node kube-apiserver v1.36.3 sent the first bookmark 2 minutes after the
// list, then one every 60 s (12 minutes watched, longest gap 2m0s), so a
// healthy watch never goes this long without one.
const MaxSilence = 5 * time.Minute

// relistTimeout bounds the wait for a new cache's first list; past it the
// relist is given up and the current cache kept.
const relistTimeout = time.Minute

// stale reports whether the current cache has heard nothing for longer
// than MaxSilence since it synced, while the API server answered within
// that time and after the cache last heard anything.
func (s *Source) stale(now time.Time) bool {
	c := s.cur.Load()
	if s.answered == nil || !c.inf.HasSynced() {
		return false
	}
	heard := c.lastHeard()
	return now.Sub(heard) > s.maxSilence && now.Sub(s.answered()) < s.maxSilence && s.answered().After(heard)
}

// Run starts the informers and blocks until ctx is done, then stops them
// and waits for their goroutines. It returns an error, at once, only when
// the Source cannot work (no client, no node name) or Run was called
// before.
func (s *Source) Run(ctx context.Context) error {
	if s.setupErr != nil {
		return s.setupErr
	}
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("podsource: Run called twice")
	}
	s.log.Info("watching the node's pods")
	run := func(c *podCache) (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.inf.RunWithContext(runCtx)
		}()
		return func() { cancel(); <-done }
	}
	stop := run(s.cur.Load())
	check := time.NewTicker(s.maxSilence / 5)
	defer check.Stop()
	for {
		var reason string
		select {
		case <-ctx.Done():
			stop()
			return nil
		case reason = <-s.relistC:
		case now := <-check.C:
			if !s.stale(now) {
				continue
			}
			reason = fmt.Sprintf("the watch brought nothing for %s while the API server answered", now.Sub(s.LastHeard()).Round(time.Second))
		}
		n, err := s.newCache()
		if err != nil { // not for a new informer: a bug
			s.log.Error("cannot relist the node's pods", "err", err)
			continue
		}
		stopNew := run(n)
		syncCtx, cancel := context.WithTimeout(ctx, relistTimeout)
		synced := cache.WaitForCacheSync(syncCtx.Done(), n.inf.HasSynced)
		cancel()
		if !synced {
			stopNew()
			if ctx.Err() != nil {
				stop()
				return nil
			}
			s.log.Warn("relist of the node's pods did not complete; keeping the current cache", "reason", reason, "within", relistTimeout)
			continue
		}
		// Counted before the swap: whoever sees the new cache sees it counted.
		s.relists.Add(1)
		s.cur.Store(n)
		stop()
		stop = stopNew
		s.log.Info("relisted the node's pods", "reason", reason, "pods", len(n.inf.GetStore().ListKeys()))
		if s.onRelisted != nil {
			s.onRelisted()
		}
	}
}

// HasSynced reports whether the node's pods have been listed.
func (s *Source) HasSynced() bool { return s.setupErr == nil && s.cur.Load().inf.HasSynced() }

// WaitForSync blocks until HasSynced or ctx is done; then it says which
// cache had not synced.
func (s *Source) WaitForSync(ctx context.Context) error {
	if s.setupErr != nil {
		return s.setupErr
	}
	if cache.WaitForCacheSync(ctx.Done(), s.HasSynced) {
		return nil
	}
	return fmt.Errorf("podsource: pods of node %s not listed yet: %w", s.nodeName, context.Cause(ctx))
}

// Pods returns the node's active pods, converted, sorted by namespace and
// name. It answers from the cache: an error comes only before the first
// list of the node's pods has arrived.
//
// Terminal pods (phase Succeeded or Failed) and pods being deleted
// (deletionTimestamp set) are left out: their containers have stopped or
// are stopping, so the resources they hold are already being released and
// evicting them frees nothing more. The kubelet's eviction manager ranks
// the same set, its active pods (not terminal, termination not requested).
func (s *Source) Pods(_ context.Context) ([]signals.Pod, error) {
	if !s.HasSynced() {
		if s.setupErr != nil {
			return nil, s.setupErr
		}
		return nil, fmt.Errorf("podsource: pods of node %s not listed yet", s.nodeName)
	}
	all, err := s.cur.Load().lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list cached pods: %w", err)
	}
	out := make([]signals.Pod, 0, len(all))
	s.mu.Lock()
	trusted := s.trustedDS
	s.mu.Unlock()
	for _, pod := range all {
		if !active(pod) || !s.onNode(pod) {
			continue
		}
		p := ConvertOn(pod, s.nodeUID())
		p.DaemonSet = p.DaemonSet && trusted[p.Namespace]
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b signals.Pod) int {
		return cmpStrings(a.Namespace, b.Namespace, a.Name, b.Name)
	})
	return out, nil
}

// InFlight returns evictd's evictions still under way on the node, sorted
// by namespace and name: the pods that carry a True DisruptionTarget
// condition of reason decide.DisruptionTargetReason and have not finished:
// being deleted (deletionTimestamp set) in a phase neither Succeeded nor
// Failed, or in phase Failed with a container the kubelet still reports
// running (see inFlight). They are what Pods leaves out and what a restarted evictd
// must wait for: their containers may still hold what their eviction is to
// free. It answers from the cache, nil before the first list of the node's
// pods.
func (s *Source) InFlight() []decide.InFlight {
	if !s.HasSynced() {
		return nil
	}
	all, err := s.cur.Load().lister.List(labels.Everything())
	if err != nil {
		s.log.Debug("list cached pods", "err", err)
		return nil
	}
	var out []decide.InFlight
	for _, pod := range all {
		if inFlight(pod) && s.onNode(pod) {
			out = append(out, inFlightOf(pod))
		}
	}
	slices.SortFunc(out, func(a, b decide.InFlight) int {
		return cmpStrings(a.Namespace, b.Namespace, a.Name, b.Name)
	})
	return out
}

// CachedPod returns the node's pod of that namespace and name as the
// cache holds it, without a request to the API server, and whether the
// cache holds one: never before the first list of the node's pods has
// arrived, nor for a pod bound to another node. The pod is the cache's,
// slimmed (see slim), and must not be modified. It implements
// internal/evict's PodCache.
func (s *Source) CachedPod(namespace, name string) (*v1.Pod, bool) {
	if !s.HasSynced() {
		return nil, false
	}
	pod, err := s.cur.Load().lister.Pods(namespace).Get(name)
	if err != nil || !s.onNode(pod) {
		return nil, false
	}
	return pod, true
}

// CachedPods returns the node's pods as the cache holds them, without a
// request to the API server; none before the first list of the node's
// pods. The pods are the cache's, slimmed (see slim), and must not be
// modified. It implements internal/evict's PodLister.
func (s *Source) CachedPods() []*v1.Pod {
	if !s.HasSynced() {
		return nil
	}
	all, err := s.cur.Load().lister.List(labels.Everything())
	if err != nil {
		s.log.Debug("list cached pods", "err", err)
		return nil
	}
	out := all[:0:0]
	for _, pod := range all {
		if s.onNode(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// active reports a pod that still holds its resources: not terminal, not
// being deleted.
func active(pod *v1.Pod) bool {
	switch {
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		return false
	case pod.DeletionTimestamp != nil:
		return false
	}
	return true
}

// inFlight reports a pod evictd evicted that is still terminating, with
// evictd's DisruptionTarget condition: being deleted and not terminal, or
// terminal with a container still running. evictd writes an evicted pod's
// phase Failed as the kubelet starts stopping its containers, and deletes
// it once they have stopped (internal/evict); before that, the pod reads
// Failed while its containers may still hold what the eviction is to
// free.
func inFlight(pod *v1.Pod) bool {
	terminal := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && !terminal:
	case terminal && kubeclient.ContainersRunning(pod) && ptr.Deref(pod.DeletionGracePeriodSeconds, -1) != 0:
	default:
		return false
	}
	return evictedByEvictd(pod)
}

// evictedByEvictd reports a pod with a True DisruptionTarget condition of
// evictd's reason.
func evictedByEvictd(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == decide.DisruptionTargetReason
		}
	}
	return false
}

// noteOddities logs, once per version of a pod, what Convert had to clamp
// or guess.
func (s *Source) noteOddities(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if !s.onNode(pod) {
		s.log.Warn("the API server listed a pod bound to another node; it is never ranked or evicted here",
			"pod", pod.Namespace+"/"+pod.Name, "boundTo", pod.Spec.NodeName)
		return
	}
	if _, notes := convert(pod, ""); len(notes) > 0 {
		s.log.Warn("odd values in pod; ranking uses the corrected ones",
			"pod", pod.Namespace+"/"+pod.Name, "notes", strings.Join(notes, "; "))
	}
}

// onNode reports whether pod is bound to this Source's node. The field
// selector asks the API server for those alone; this holds also when an
// answer ignores it.
func (s *Source) onNode(pod *v1.Pod) bool { return pod.Spec.NodeName == s.nodeName }

// watchFailed logs a failed list or watch at Warn when it differs from the
// last one for that resource, at Debug when it repeats; the reflector
// retries with backoff on its own.
func (s *Source) watchFailed(resource string, err error) {
	msg := err.Error()
	s.mu.Lock()
	repeated := s.watchErr[resource] == msg
	s.watchErr[resource] = msg
	s.mu.Unlock()
	level := slog.LevelWarn
	if repeated {
		level = slog.LevelDebug
	}
	attrs := []any{"resource", resource, "err", err}
	if apierrors.IsForbidden(err) && strings.Contains(msg, "impersonate") {
		attrs = append(attrs, "hint", "the API server refused evictd acting as its node (--impersonate-node): that needs Kubernetes 1.36 or later "+
			"(1.35 with the ConstrainedImpersonation feature gate), a token bound to this node and deploy/rbac.yaml; "+
			"before 1.36 run with --impersonate-node=false and apply deploy/rbac-before-1.36.yaml")
	}
	if errors.Is(err, syscall.EPERM) {
		attrs = append(attrs, "hint", "the connection to the API server was not permitted: under systemd, evictd.service allows IP traffic with loopback only; "+
			"allow the API server's address in /etc/systemd/system/evictd.service.d/api-server.conf (the .example beside it says how)")
	}
	s.log.Log(context.Background(), level, "list/watch failed; answering from the cache and retrying", attrs...)
}

// slim drops from a cached object what evictd never reads, to keep the
// cache small: managedFields (often the largest part of an object), the
// last-applied-configuration kubectl keeps in an annotation and, of a pod,
// everything Convert, active, inFlight and internal/evict's wait for an
// evicted pod (UID, deletion timestamp and grace period, phase, running
// containers) do not look at: a container keeps only its name, resources
// and restart policy, the status only its phase, QoS class, the type,
// status, reason and transition time of its DisruptionTarget condition,
// and the name and containerID of each container's, init container's and
// ephemeral container's status and whether it runs.
func slim(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	m.SetManagedFields(nil)
	delete(m.GetAnnotations(), lastAppliedAnnotation)
	if pod, ok := obj.(*v1.Pod); ok {
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i, c := range cs {
				cs[i] = v1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy, RestartPolicyRules: c.RestartPolicyRules}
			}
		}
		pod.Spec.EphemeralContainers = nil
		var conds []v1.PodCondition
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.DisruptionTarget {
				conds = []v1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}}
				break
			}
		}
		pod.Status = v1.PodStatus{
			Phase: pod.Status.Phase, QOSClass: pod.Status.QOSClass, Conditions: conds,
			InitContainerStatuses:      slimStatuses(pod.Status.InitContainerStatuses),
			ContainerStatuses:          slimStatuses(pod.Status.ContainerStatuses),
			EphemeralContainerStatuses: slimStatuses(pod.Status.EphemeralContainerStatuses),
		}
	}
	return obj, nil
}

// inFlightOf is the eviction in flight of pod (inFlight). A pod being
// deleted has its deletion's timestamp and grace period. One evictd wrote
// Failed and has not deleted yet is being stopped by the kubelet, which
// gives it its terminationGracePeriodSeconds from the time evictd wrote
// its DisruptionTarget condition.
func inFlightOf(pod *v1.Pod) decide.InFlight {
	f := decide.InFlight{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	if pod.DeletionTimestamp != nil {
		f.DeletionTimestamp = pod.DeletionTimestamp.Time
		f.DeletionGracePeriod = time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second
		return f
	}
	f.DeletionGracePeriod = time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, v1.DefaultTerminationGracePeriodSeconds)) * time.Second
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			f.DeletionTimestamp = c.LastTransitionTime.Add(f.DeletionGracePeriod)
		}
	}
	return f
}

// slimStatuses keeps the name and containerID of each container status,
// and that it runs (not since when).
func slimStatuses(in []v1.ContainerStatus) []v1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, len(in))
	for i := range in {
		out[i] = v1.ContainerStatus{Name: in[i].Name, ContainerID: in[i].ContainerID}
		if in[i].State.Running != nil {
			out[i].State.Running = &v1.ContainerStateRunning{}
		}
	}
	return out
}

func podVersion(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}

// cmpStrings compares a1 with b1, then a2 with b2.
func cmpStrings(a1, b1, a2, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

// KnownUIDs returns the UIDs of every pod of the node the cache holds,
// active or not (terminating, finished), nil before the first list.
func (s *Source) KnownUIDs() map[string]bool {
	if !s.HasSynced() {
		return nil
	}
	all, err := s.cur.Load().lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make(map[string]bool, len(all))
	for _, pod := range all {
		out[string(pod.UID)] = true
	}
	return out
}
