package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// fieldManager names evictd in the node's managedFields.
const fieldManager = "evictd"

// maxPending bounds the transitions waiting for their event while the API
// server is away; the oldest are dropped (and logged) beyond it.
const maxPending = 64

// writeTimeout bounds one write: the conditions' patch, the taints' patch
// and their retries on a conflict.
const writeTimeout = 30 * time.Second

// Publisher writes evictd's conditions, taints and events for one node. It
// implements the loop's StatusPublisher; Run does the writing.
type Publisher struct {
	cfg      Config
	client   *kubeclient.Client
	recorder record.EventRecorder
	log      *slog.Logger
	poke     chan struct{}
	nodes    cache.SharedIndexInformer // the node's own object, by field selector

	mu       sync.Mutex
	states   map[signals.Pressure]*pressureState
	pending  []transition // in order of Seq
	seq      uint64
	unknown  map[signals.Pressure]bool // unknown kinds already logged
	lastSent atomic.Int64              // unix nanoseconds of the last successful write

	// Owned by Run.
	baseline   []v1.NodeCondition // the node's conditions before evictd's first write
	haveBase   bool
	written    map[signals.Pressure]decide.PressureReport
	lastWrite  time.Time
	nextReport time.Time // when the conditions are written again if nothing changes
	answer     *v1.Node  // the API server's answer to evictd's last write
	absent     bool      // the node was found missing, and that was logged
}

// New checks cfg, fills in its defaults and returns a Publisher ready to
// Run. client and recorder act under evictd's identity; the recorder
// should come from a broadcaster that writes to the API server.
func New(cfg Config, client *kubeclient.Client, recorder record.EventRecorder, log *slog.Logger) (*Publisher, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	if client == nil || recorder == nil || log == nil {
		return nil, errors.New("node status: client, event recorder and logger are required")
	}
	p := &Publisher{
		cfg:      cfg,
		client:   client,
		recorder: recorder,
		log:      log.With("node", cfg.NodeName),
		poke:     make(chan struct{}, 1),
		states:   map[signals.Pressure]*pressureState{},
		unknown:  map[signals.Pressure]bool{},
		written:  map[signals.Pressure]decide.PressureReport{},
	}
	// The node's own object only: the API server's watch cache sends this
	// watch the events of this one node (nodes are indexed by name).
	p.nodes = kubeclient.NewInformer(client.Nodes(), &v1.Node{}, 0, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	}, nil)
	if err := p.nodes.SetTransform(slimNode); err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	if _, err := p.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.wake() },
		UpdateFunc: func(any, any) { p.wake() },
		DeleteFunc: func(any) { p.wake() },
	}); err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	if err := p.nodes.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		p.log.Debug("watch of the node failed; the informer retries with backoff", "err", err)
	}); err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	return p, nil
}

// slimNode drops from the cached node what the publisher never reads: its
// managedFields and images, the largest parts of a Node.
func slimNode(obj any) (any, error) {
	if n, ok := obj.(*v1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
	}
	return obj, nil
}

// wake makes Run look again; it never blocks.
func (p *Publisher) wake() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// lastWritten returns when the conditions were last written successfully
// (by the publisher's clock), or the zero time if never.
func (p *Publisher) lastWritten() time.Time {
	if ns := p.lastSent.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Publish records the latest reports and wakes Run; it never blocks. A
// change of a pressure's Active state is a transition: it gets one event
// and is written at once. A report of an unknown kind of pressure is
// logged (once) and ignored.
func (p *Publisher) Publish(now time.Time, reports []decide.PressureReport) {
	p.mu.Lock()
	for _, r := range reports {
		if _, ok := p.cfg.ConditionTypes[r.Pressure]; !ok {
			if !p.unknown[r.Pressure] {
				p.unknown[r.Pressure] = true
				p.log.Warn("ignoring a report of an unknown kind of pressure", "pressure", string(r.Pressure))
			}
			continue
		}
		st := p.states[r.Pressure]
		switch {
		case st == nil:
			st = &pressureState{FirstSeen: now}
			p.states[r.Pressure] = st
			p.queueLocked(transition{Pressure: r.Pressure, Active: r.Active, Message: message(r), At: now, Initial: true})
		case st.Report.Active != r.Active:
			st.Transitioned = true
			p.queueLocked(transition{Pressure: r.Pressure, Active: r.Active, Message: message(r), At: now})
		}
		st.Report = r
	}
	p.mu.Unlock()
	p.wake()
}

// queueLocked adds tr to the transitions waiting for their event.
func (p *Publisher) queueLocked(tr transition) {
	p.seq++
	tr.Seq = p.seq
	p.pending = append(p.pending, tr)
	if n := len(p.pending) - maxPending; n > 0 {
		p.log.Warn("dropping the events of old pressure transitions: the API server has been away too long",
			"dropped", n, "oldest", p.pending[0].At)
		p.pending = append(p.pending[:0], p.pending[n:]...)
	}
}

// snapshot is the desired state at one moment.
type snapshot struct {
	states []pressureState // in signals.Pressures() order
	events []transition
}

// snapshot copies the desired state; ok is false before the first Publish.
func (p *Publisher) snapshot() (snap snapshot, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, kind := range signals.Pressures() {
		if st := p.states[kind]; st != nil {
			snap.states = append(snap.states, *st)
		}
	}
	snap.events = append([]transition(nil), p.pending...)
	return snap, len(snap.states) > 0
}

// ack forgets the transitions up to seq, whose events have been emitted.
func (p *Publisher) ack(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for i < len(p.pending) && p.pending[i].Seq <= seq {
		i++
	}
	p.pending = append(p.pending[:0], p.pending[i:]...)
}

// changed reports whether snap differs from what was last written in a
// way that must be written at once: a pressure's state or transition time.
func (p *Publisher) changed(snap snapshot) bool {
	if len(snap.events) > 0 {
		return true
	}
	for _, st := range snap.states {
		w, ok := p.written[st.Report.Pressure]
		if !ok || w.Active != st.Report.Active || !w.Since.Equal(st.Report.Since) {
			return true
		}
	}
	return false
}

// Run watches the node and writes the desired state until ctx ends:
// evictd's conditions at once when a pressure changes or the node shows
// something else (another writer, a node created again), else every
// ReportFrequency with its jitter; its taints whenever they differ. Nothing
// is read from the API server but the watch: no GET before a write. A
// failed write is retried on Config.Retry's jittered schedule, each
// attempt with the latest state, so stale intermediate states are never
// written. It returns nil when ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	go p.nodes.RunWithContext(ctx)
	// Nothing can be written before the watch has listed the node: wait
	// for it (the informer retries with backoff while the API server is
	// away; Publish keeps recording meanwhile).
	if !cache.WaitForCacheSync(ctx.Done(), p.nodes.HasSynced) {
		return nil
	}
	clk := p.cfg.Clock
	var bo wait.Backoff
	var retryAt time.Time
	failures := 0
	for {
		snap, ok := p.snapshot()
		node := p.node()
		now := clk.Now()
		var next time.Time // when to look again; zero: only when poked
		var why string     // why to write now; "" when nothing is due
		switch {
		case !ok:
		case node == nil:
			if !p.absent {
				p.absent = true
				p.log.Warn("the node does not exist (yet); evictd writes its conditions once the watch shows it")
			}
			next = now.Add(p.cfg.UpdateFrequency)
		case failures > 0 && now.Before(retryAt):
			next = retryAt
		default:
			if p.absent {
				p.absent = false
				p.log.Info("the node exists; writing its conditions")
			}
			if !p.haveBase {
				p.adopt(snap, node)
				snap, _ = p.snapshot()
			}
			why = p.due(snap, node, now)
			if why == "" {
				next = now.Add(p.cfg.UpdateFrequency)
				if p.nextReport.Before(next) {
					next = p.nextReport
				}
			}
		}
		if why == "" {
			if !p.wait(ctx, next) {
				return nil
			}
			continue
		}

		if failures == 0 {
			bo = p.cfg.Retry
		}
		err := p.write(ctx, snap, node, why, failures > 0)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			delay := bo.Step()
			if d, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(d)*time.Second > delay {
				delay = time.Duration(d) * time.Second // 429 or 5xx with Retry-After
			}
			retryAt = clk.Now().Add(delay)
			if failures == 1 {
				p.log.Warn("could not write node status; retrying with backoff", "err", err, "retry_in", delay)
			} else {
				p.log.Debug("could not write node status", "err", err, "attempt", failures, "retry_in", delay)
			}
			continue
		}
		if failures > 0 {
			p.log.Info("node status written after failed attempts", "failed_attempts", failures)
		}
		failures = 0
	}
}

// node returns the newest version of the node evictd knows, from its
// watch or from the answer to its own last write, or nil when the watch
// shows none.
func (p *Publisher) node() *v1.Node {
	obj, exists, err := p.nodes.GetStore().GetByKey(p.cfg.NodeName)
	if err != nil || !exists {
		return nil
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		return nil
	}
	return p.answerOr(n)
}

// NodeUID returns the UID of the node as its watch shows it, or "" before
// the watch has listed it. It is safe to call from any goroutine.
func (p *Publisher) NodeUID() types.UID {
	obj, exists, err := p.nodes.GetStore().GetByKey(p.cfg.NodeName)
	if n, ok := obj.(*v1.Node); ok && exists && err == nil {
		return n.UID
	}
	return ""
}

// EphemeralStorageCapacity says whether the node as its watch shows it
// reports an ephemeral-storage capacity, which the kubelet does only with
// localStorageCapacityIsolation on; known is false before the watch has
// listed the node. It is safe to call from any goroutine.
func (p *Publisher) EphemeralStorageCapacity() (reported, known bool) {
	obj, exists, err := p.nodes.GetStore().GetByKey(p.cfg.NodeName)
	n, ok := obj.(*v1.Node)
	if !ok || !exists || err != nil {
		return false, false
	}
	_, reported = n.Status.Capacity[v1.ResourceEphemeralStorage]
	return reported, true
}

// newer reports whether resourceVersion a is later than b. The API server
// gives no order to resourceVersions; etcd's are integers that grow, and
// anything else counts as not newer, so the watch's version wins.
func newer(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// adopt takes the node's conditions as evictd's starting point the first
// time it sees the node: the baseline for the first events and, when the
// node already shows every state of snap (evictd restarted) and no
// transition needs an event, what was written, with the next report due
// a jittered period after the oldest of their heartbeats. A fleet of
// agents restarted together then writes no Node until each one's report
// comes due.
func (p *Publisher) adopt(snap snapshot, node *v1.Node) {
	p.baseline = node.DeepCopy().Status.Conditions
	p.haveBase = true
	var oldest time.Time
	for _, st := range snap.states {
		c := p.shown(node, st)
		if c == nil {
			return
		}
		if oldest.IsZero() || c.LastHeartbeatTime.Time.Before(oldest) {
			oldest = c.LastHeartbeatTime.Time
		}
	}
	for _, tr := range snap.events {
		if _, _, _, ok := transitionEvent(p.cfg, tr, p.baseline, false); ok || !tr.Initial {
			return
		}
	}
	if n := len(snap.events); n > 0 {
		p.ack(snap.events[n-1].Seq)
	}
	for _, st := range snap.states {
		p.written[st.Report.Pressure] = st.Report
	}
	p.nextReport = oldest.Add(p.cfg.Jitter(p.cfg.ReportFrequency))
	p.log.Info("the node already shows evictd's conditions; next written when they change or at the report", "next_report", p.nextReport)
}

// due says why the node must be written now, or "" when it need not be:
// a transition, the node showing conditions or taints other than evictd's
// state, or the report period having passed.
func (p *Publisher) due(snap snapshot, node *v1.Node, now time.Time) string {
	switch {
	case p.changed(snap):
		return "change"
	case p.drifted(snap, node, now):
		return "differs"
	case !now.Before(p.nextReport):
		return "report"
	}
	return ""
}

// drifted reports whether node shows evictd's conditions or taints other
// than snap says: a condition missing or with another status or reason,
// or evictd's taints not matching.
func (p *Publisher) drifted(snap snapshot, node *v1.Node, now time.Time) bool {
	if !p.conditionsShown(node, snap.states) {
		return true
	}
	_, changed := setTaints(p.cfg, node.Spec.Taints, snap.states, now)
	return changed
}

// wait blocks until next (by the publisher's clock; zero: no deadline), a
// Publish, a change of the node or the end of ctx, and reports whether ctx
// is still live.
func (p *Publisher) wait(ctx context.Context, next time.Time) bool {
	var timeout <-chan time.Time
	if !next.IsZero() {
		d := next.Sub(p.cfg.Clock.Now())
		if d <= 0 {
			return ctx.Err() == nil
		}
		t := p.cfg.Clock.NewTimer(d)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-p.poke:
	case <-timeout:
	}
	return true
}

// write makes node show snap: the conditions by a patch of nodes/status
// when they are due (why) or differ, the taints by a patch carrying the
// node's resourceVersion when they differ, then one event per pending
// transition. late says earlier attempts failed, so the events say when
// they happened.
func (p *Publisher) write(ctx context.Context, snap snapshot, node *v1.Node, why string, late bool) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	name := p.cfg.NodeName
	if !p.haveBase {
		p.baseline = node.DeepCopy().Status.Conditions
		p.haveBase = true
	}

	now := p.cfg.Clock.Now()
	conds := buildConditions(p.cfg, snap.states, node.Status.Conditions, now)
	if why != "differs" || !p.conditionsShown(node, snap.states) {
		patch, err := statusPatch(conds)
		if err != nil {
			return err
		}
		n, err := p.client.Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
		if err != nil {
			p.cfg.OnAPIError(metrics.APINodePatch)
			return fmt.Errorf("patch conditions of node %s: %w", name, err)
		}
		slimNode(n)
		p.answer = n
		p.lastWrite = now
		p.nextReport = now.Add(p.cfg.Jitter(p.cfg.ReportFrequency))
		p.lastSent.Store(now.UnixNano())
		p.logConditions(conds, node.Status.Conditions)
		p.log.Debug("node conditions written", "why", why, "next_report", p.nextReport)
	}
	// The answer carries the new resourceVersion: the taints' patch starts
	// from it, so it does not conflict with evictd's own write.
	if err := p.patchTaints(ctx, p.answerOr(node), snap.states, now); err != nil {
		return err
	}

	ref := &v1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID, Namespace: ""}
	for _, tr := range snap.events {
		if typ, reason, msg, ok := transitionEvent(p.cfg, tr, p.baseline, late); ok {
			p.recorder.Event(ref, typ, reason, msg)
		}
	}
	if n := len(snap.events); n > 0 {
		p.ack(snap.events[n-1].Seq)
	}
	for _, st := range snap.states {
		p.written[st.Report.Pressure] = st.Report
	}
	return nil
}

// answerOr returns the answer to evictd's last write when it is a newer
// version of node, else node.
func (p *Publisher) answerOr(node *v1.Node) *v1.Node {
	if a := p.answer; a != nil && a.UID == node.UID && newer(a.ResourceVersion, node.ResourceVersion) {
		return a
	}
	return node
}

// shown returns the node's condition for st when it shows st (same
// status and reason), else nil.
func (p *Publisher) shown(node *v1.Node, st pressureState) *v1.NodeCondition {
	c := findCondition(node.Status.Conditions, p.cfg.ConditionTypes[st.Report.Pressure])
	if c == nil || c.Status != status(st.Report.Active) || c.Reason != Reason(st.Report.Pressure, st.Report.Active) {
		return nil
	}
	return c
}

// conditionsShown reports whether node shows every state of states.
func (p *Publisher) conditionsShown(node *v1.Node, states []pressureState) bool {
	for _, st := range states {
		if p.shown(node, st) == nil {
			return false
		}
	}
	return true
}

// logConditions logs each condition of conds that is new against existing.
func (p *Publisher) logConditions(conds, existing []v1.NodeCondition) {
	for _, c := range conds {
		old := findCondition(existing, c.Type)
		// The node keeps times in whole seconds: compare at that
		// precision, or every report after a transition would log the
		// condition as newly set.
		since := c.LastTransitionTime.Rfc3339Copy()
		if old == nil || old.Status != c.Status || !old.LastTransitionTime.Equal(&since) {
			p.log.Info("node condition set", "condition", string(c.Type), "status", string(c.Status),
				"reason", c.Reason, "message", c.Message, "since", c.LastTransitionTime.Time)
		}
	}
}

// patchTaints makes node's taints match states by a JSON merge patch of
// the whole taint list carrying node's resourceVersion: if anyone changed
// the node since that version, the API server refuses it (409) and no one
// else's taint is lost; the next attempt starts from the version the watch
// brings. Only evictd's own keys change; nothing is written when they are
// already right.
func (p *Publisher) patchTaints(ctx context.Context, node *v1.Node, states []pressureState, now time.Time) error {
	taints, changed := setTaints(p.cfg, node.Spec.Taints, states, now)
	if !changed {
		return nil
	}
	patch, err := taintPatch(node.ResourceVersion, taints)
	if err != nil {
		return err
	}
	n, err := p.client.Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		p.cfg.OnAPIError(metrics.APINodeTaints)
		if apierrors.IsConflict(err) {
			return fmt.Errorf("patch taints of node %s: the node changed since version %s; retrying from the newer one: %w", node.Name, node.ResourceVersion, err)
		}
		return fmt.Errorf("patch taints of node %s: %w", node.Name, err)
	}
	slimNode(n)
	p.answer = n
	p.log.Info("node taints set", "taints", taintKeys(taints, p.cfg), "effect", string(p.cfg.TaintEffect))
	return nil
}

// taintPatch is the JSON merge patch that sets the node's whole taint list
// if the node is still at resourceVersion rv.
func taintPatch(rv string, taints []v1.Taint) ([]byte, error) {
	if taints == nil {
		taints = []v1.Taint{}
	}
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return nil, fmt.Errorf("encode node taint patch: %w", err)
	}
	return b, nil
}

// taintKeys lists evictd's taint keys present in taints.
func taintKeys(taints []v1.Taint, cfg Config) []string {
	var keys []string
	for _, t := range taints {
		for _, k := range cfg.TaintKeys {
			if t.Key == k {
				keys = append(keys, k)
			}
		}
	}
	return keys
}
