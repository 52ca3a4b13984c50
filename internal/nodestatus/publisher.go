package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

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

// retryBase is the first retry delay after a failed write; it doubles up
// to half the heartbeat interval.
const retryBase = 200 * time.Millisecond

// Publisher writes evictd's conditions, taints and events for one node. It
// implements the loop's StatusPublisher; Run does the writing.
type Publisher struct {
	cfg      Config
	client   *kubeclient.Client
	recorder record.EventRecorder
	log      *slog.Logger
	poke     chan struct{}

	mu       sync.Mutex
	states   map[signals.Pressure]*pressureState
	pending  []transition // in order of Seq
	seq      uint64
	unknown  map[signals.Pressure]bool // unknown kinds already logged
	lastSent atomic.Int64              // unix nanoseconds of the last successful write

	// Owned by Run.
	baseline  []v1.NodeCondition // the node's conditions before evictd's first write
	haveBase  bool
	written   map[signals.Pressure]decide.PressureReport
	lastWrite time.Time
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
	return &Publisher{
		cfg:      cfg,
		client:   client,
		recorder: recorder,
		log:      log.With("node", cfg.NodeName),
		poke:     make(chan struct{}, 1),
		states:   map[signals.Pressure]*pressureState{},
		unknown:  map[signals.Pressure]bool{},
		written:  map[signals.Pressure]decide.PressureReport{},
	}, nil
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
	select {
	case p.poke <- struct{}{}:
	default:
	}
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

// Run writes the desired state until ctx ends: at once when it changed,
// else every HeartbeatInterval. A failed write is retried with exponential
// backoff (200ms doubling, jittered, capped at half the heartbeat
// interval), each attempt with the latest state, so the node catches up
// within one heartbeat interval of the API server's return and stale
// intermediate states are never written. It returns nil when ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	clk, interval := p.cfg.Clock, p.cfg.HeartbeatInterval
	bo := p.backoff()
	var retryAt time.Time
	failures := 0
	for {
		snap, ok := p.snapshot()
		now := clk.Now()
		var next time.Time // when to look again; zero: only when poked
		attempt := false
		switch {
		case !ok:
		case failures > 0:
			attempt = !now.Before(retryAt)
			next = retryAt
		case p.changed(snap) || !now.Before(p.lastWrite.Add(interval)):
			attempt = true
		default:
			next = p.lastWrite.Add(interval)
		}
		if !attempt {
			if !p.wait(ctx, next) {
				return nil
			}
			continue
		}

		err := p.write(ctx, snap, failures > 0)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			delay := bo.Step()
			retryAt = clk.Now().Add(delay)
			if failures == 1 {
				p.log.Warn("could not write node status; retrying with backoff", "err", err, "retry_in", delay)
			} else {
				p.log.Debug("could not write node status", "err", err, "attempt", failures, "retry_in", delay)
			}
			continue
		}
		if failures > 0 {
			p.log.Info("node status written after the API server came back", "failed_attempts", failures)
		}
		failures, bo = 0, p.backoff()
	}
}

// backoff returns the retry schedule: 200ms doubling up to half the
// heartbeat interval, 20% jitter, so that with the jitter the next attempt
// after the API server's return comes within one heartbeat interval.
func (p *Publisher) backoff() wait.Backoff {
	limit := p.cfg.HeartbeatInterval / 2
	return wait.Backoff{Duration: min(retryBase, limit), Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: limit}
}

// wait blocks until next (by the publisher's clock; zero: no deadline), a
// Publish or the end of ctx, and reports whether ctx is still live.
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

// write makes the node show snap: conditions by a patch of nodes/status,
// taints by an update of the node, then one event per pending transition.
// late says earlier attempts failed, so the events say when they happened.
func (p *Publisher) write(ctx context.Context, snap snapshot, late bool) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.HeartbeatInterval)
	defer cancel()
	nodes := p.client.Nodes()
	name := p.cfg.NodeName

	node, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		p.cfg.OnAPIError(metrics.APINodeGet)
		return fmt.Errorf("get node %s: %w", name, err)
	}
	if !p.haveBase {
		p.baseline = node.DeepCopy().Status.Conditions
		p.haveBase = true
	}

	now := p.cfg.Clock.Now()
	conds := buildConditions(p.cfg, snap.states, node.Status.Conditions, now)
	patch, err := statusPatch(conds)
	if err != nil {
		return err
	}
	// A patch without a resourceVersion is not refused for a conflict
	// (the API server retries internally), but admission may still return
	// 409 under contention; retrying it is harmless.
	patched := node
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
		if err != nil {
			p.cfg.OnAPIError(metrics.APINodePatch)
			return err
		}
		patched = n
		return nil
	})
	if err != nil {
		return fmt.Errorf("patch conditions of node %s: %w", name, err)
	}
	// The patched node carries the new resourceVersion: start from it, so
	// the taint update does not conflict with evictd's own patch.
	if err := p.updateTaints(ctx, patched, snap.states, now); err != nil {
		return err
	}

	for _, c := range conds {
		old := findCondition(node.Status.Conditions, c.Type)
		// The node keeps times in whole seconds: compare at that
		// precision, or every heartbeat after a transition would log the
		// condition as newly set.
		since := c.LastTransitionTime.Rfc3339Copy()
		if old == nil || old.Status != c.Status || !old.LastTransitionTime.Equal(&since) {
			p.log.Info("node condition set", "condition", string(c.Type), "status", string(c.Status),
				"reason", c.Reason, "message", c.Message, "since", c.LastTransitionTime.Time)
		}
	}
	p.log.Debug("node status written", "heartbeat", now)
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
	p.lastWrite = now
	p.lastSent.Store(now.UnixNano())
	return nil
}

// updateTaints makes node's taints match states by an update with the
// node's resourceVersion, re-reading the node on a conflict. Only evictd's
// own keys change; nothing is written when they are already right.
func (p *Publisher) updateTaints(ctx context.Context, node *v1.Node, states []pressureState, now time.Time) error {
	nodes := p.client.Nodes()
	fresh := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !fresh {
			n, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				p.cfg.OnAPIError(metrics.APINodeGet)
				return err
			}
			node = n
		}
		fresh = false
		taints, changed := setTaints(p.cfg, node.Spec.Taints, states, now)
		if !changed {
			return nil
		}
		n := node.DeepCopy()
		n.Spec.Taints = taints
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			p.cfg.OnAPIError(metrics.APINodeUpdate)
			return err
		}
		p.log.Info("node taints set", "taints", taintKeys(taints, p.cfg), "effect", string(p.cfg.TaintEffect))
		return nil
	})
	if err != nil {
		return fmt.Errorf("update taints of node %s: %w", node.Name, err)
	}
	return nil
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
