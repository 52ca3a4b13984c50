package metrics

import (
	"strings"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// The values of evictd's labels. Each label has a type, and each type a
// table of its values with what they mean: the code that emits a value
// takes it from here, and the HELP texts that list a label's values are
// written from them. What is emitted and what HELP documents are
// therefore one list. A series appears with its first event, but for the
// few the shipped alerts need from startup (initCounters, InitEvictions).
//
// The signal and pressure labels take signals.Signal and signals.Pressure,
// the outcome label decide.Outcome and the reclaim kind decide.ReclaimKind:
// those are the decision stage's own words. Gauges and histograms are not
// created ahead: a gauge exists while its reading does, and a histogram per
// signal, created for every signal, would be hundreds of empty series.

// value is one value of a label.
type value[T ~string] struct {
	v T
	// means, when not empty, follows the value in HELP, in parentheses.
	means string
	// only, when set, is the signals the value can be counted for, in a
	// family labelled by signal too; nil is every signal of the family.
	only func(signals.Signal) bool
}

// valuesOf lists the values of a table.
func valuesOf[T ~string](vs []value[T]) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = v.v
	}
	return out
}

// listed writes a table as HELP lists it: "a (what a means), b, c (…)".
func listed[T ~string](vs []value[T]) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v.v)
		if v.means != "" {
			parts[i] += " (" + v.means + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// ThresholdKind is the kind label of evictd_threshold and
// evictd_threshold_met.
type ThresholdKind string

// Threshold kinds.
const (
	KindHard ThresholdKind = "hard"
	KindSoft ThresholdKind = "soft"
)

// KindOf is the kind label of th: KindSoft or KindHard, as th.Kind says.
func KindOf(th thresholds.Threshold) ThresholdKind { return ThresholdKind(th.Kind()) }

// OutcomeDryRun is evictd_decisions_total's outcome for a pod chosen in
// dry-run, which the loop counts instead of decide.OutcomeEvict.
const OutcomeDryRun decide.Outcome = "dry-run"

// outcomes are evictd_decisions_total's outcomes: the decisions about a
// starved signal. decide.OutcomeNone has no starved signal, and a pass
// over local-storage limits counts its evictions only.
var outcomes = []value[decide.Outcome]{
	{v: decide.OutcomeEvict, means: "a pod was chosen"},
	{v: OutcomeDryRun, means: "a pod was chosen, in dry-run"},
	{v: decide.OutcomeNoEvictablePod, means: "no pod may be evicted"},
	{v: decide.OutcomeReclaimed, means: "node-level reclaim was enough", only: decide.Reclaims},
	{v: decide.OutcomeReclaimSettling, means: "node-level reclaim removed some; waiting for the runtime to free it", only: decide.Reclaims},
}

// Result is the result label of evictd_evictions_total: how an eviction
// was issued.
type Result string

// How an eviction was issued.
const (
	// ResultEvicted: the API server accepted it (the Eviction API, or a
	// hard eviction's delete).
	ResultEvicted Result = "evicted"
	// ResultStoppedLocally: the pod's containers were stopped through the
	// runtime, because the API server did not answer (the eviction is
	// owed) or evictd runs without one (--standalone-stop).
	ResultStoppedLocally Result = "stopped-locally"
)

// results are evictd_evictions_total's results: evictions issued, and
// nothing else. Its signals are the thresholds' and the local-storage
// pseudo-signals; a local-storage eviction has no local stop of its own
// (signals.Signal.Valid is false for the pseudo-signals).
var results = []value[Result]{
	{v: ResultEvicted, means: "the API server accepted it"},
	{v: ResultStoppedLocally, means: "the containers were stopped through the runtime: the API server did not answer and the eviction is owed, or evictd runs without one", only: signals.Signal.Valid},
}

// resultValues lists the values of evictd_evictions_total's result label.
func resultValues() []Result { return valuesOf(results) }

// NotIssued is the reason label of evictd_evictions_not_issued_total: why
// an eviction evictd attempted was not issued.
type NotIssued string

// Why an attempted eviction was not issued.
const (
	NotIssuedPDBBlocked NotIssued = "pdb-blocked"
	NotIssuedFailed     NotIssued = "failed"
	NotIssuedDryRun     NotIssued = "dry-run"
	// NotIssuedNotActed: with no API server, a stop through the runtime
	// cannot carry the eviction out (a soft or disk threshold's).
	NotIssuedNotActed NotIssued = "not-acted"
)

// notIssuedReasons are evictd_evictions_not_issued_total's reasons. A
// local-storage eviction has no PodDisruptionBudget refusal (it is a
// delete) and no standalone stop.
var notIssuedReasons = []value[NotIssued]{
	{v: NotIssuedPDBBlocked, means: "a PodDisruptionBudget refused it", only: signals.Signal.Valid},
	{v: NotIssuedFailed, means: "any other error"},
	{v: NotIssuedDryRun, means: "--dry-run, or no API server and no --standalone-stop"},
	{v: NotIssuedNotActed, means: "no API server, and a stop through the runtime cannot carry it out", only: signals.Signal.Valid},
}

// notIssuedValues lists the values of evictd_evictions_not_issued_total's
// reason label.
func notIssuedValues() []NotIssued { return valuesOf(notIssuedReasons) }

// evictionSignals are the signals evictd_evictions_total counts for.
func evictionSignals() []signals.Signal {
	return append(signals.All(), decide.LocalStorageSignals()...)
}

// WithheldReason is the reason label of evictd_evictions_withheld_total.
type WithheldReason string

// Reasons an eviction is withheld.
const (
	WithheldHourlyCap WithheldReason = "hourly-cap"
	WithheldRateLimit WithheldReason = "rate-limit"
	// WithheldInFlight: a pod evictd evicted is still terminating (and
	// not overdue), so the pressure it still holds is no reason to evict.
	WithheldInFlight WithheldReason = "eviction-in-flight"
)

var withheldReasons = []value[WithheldReason]{
	{v: WithheldHourlyCap, means: "--max-evictions-per-hour"},
	{v: WithheldRateLimit, means: "--local-storage-eviction-qps and --local-storage-eviction-burst"},
	{v: WithheldInFlight, means: "a pod evictd evicted is still terminating"},
}

// withheldReasonValues lists the values of evictd_evictions_withheld_total's
// reason label.
func withheldReasonValues() []WithheldReason { return valuesOf(withheldReasons) }

// Trigger is the trigger label of evictd_passes_total: what started a pass.
type Trigger string

// Pass triggers.
const (
	TriggerStart    Trigger = "start"
	TriggerTick     Trigger = "tick"
	TriggerWake     Trigger = "wake"
	TriggerDeadline Trigger = "deadline"
)

var triggers = []value[Trigger]{
	{v: TriggerStart, means: "the first pass"},
	{v: TriggerTick, means: "the housekeeping interval"},
	{v: TriggerWake, means: "a wake-up source, or after an eviction"},
	{v: TriggerDeadline, means: "a grace period, transition period or wait ending before the next tick"},
}

// triggerValues lists the values of evictd_passes_total's trigger label.
func triggerValues() []Trigger { return valuesOf(triggers) }

// WakeupSource is the source label of evictd_wakeups_total: the kind of
// internal/wakeup's wake-up source.
type WakeupSource string

// Wake-up source kinds.
const (
	WakeupMemcg        WakeupSource = "memcg"
	WakeupPSI          WakeupSource = "psi"
	WakeupMemoryEvents WakeupSource = "memory-events"
	WakeupFastPoll     WakeupSource = "fast-poll"
)

var wakeupSources = []value[WakeupSource]{
	{v: WakeupMemcg, means: "cgroup v1 threshold notification"},
	{v: WakeupPSI, means: "pressure stall trigger"},
	{v: WakeupMemoryEvents, means: "cgroup v2 memory.events"},
	{v: WakeupFastPoll, means: "working set polled near a memory threshold"},
}

// wakeupSourceValues lists the values of evictd_wakeups_total's source label.
func wakeupSourceValues() []WakeupSource { return valuesOf(wakeupSources) }

// APIVerb is the verb label of evictd_api_errors_total: the request to the
// API server that failed.
type APIVerb string

// API server requests.
const (
	APINodePatch      APIVerb = "node_patch"
	APINodeTaints     APIVerb = "node_patch_taints"
	APILeaseRenew     APIVerb = "lease_renew"
	APIPodGet         APIVerb = "pod_get"
	APIPodEvict       APIVerb = "pod_evict"
	APIPodDelete      APIVerb = "pod_delete"
	APIPodPatchStatus APIVerb = "pod_patch_status"
)

var apiVerbs = []value[APIVerb]{
	{v: APINodePatch, means: "PATCH of its conditions"},
	{v: APINodeTaints, means: "PATCH of its taints, with the node's resourceVersion"},
	{v: APILeaseRenew, means: "create, update or GET of its Lease"},
	{v: APIPodGet, means: "GET of a pod"},
	{v: APIPodEvict, means: "POST of pods/eviction"},
	{v: APIPodDelete, means: "DELETE of a pod, a hard eviction's"},
	{v: APIPodPatchStatus, means: "PATCH of pods/status"},
}

// apiVerbValues lists the values of evictd_api_errors_total's verb label.
func apiVerbValues() []APIVerb { return valuesOf(apiVerbs) }

// RuntimeOperation is the operation label of evictd_runtime_errors_total.
type RuntimeOperation string

// Container runtime operations.
const (
	RuntimePodDiskStats   RuntimeOperation = "pod-disk-stats"
	RuntimeStopContainers RuntimeOperation = "stop-containers"
)

var runtimeOperations = []value[RuntimeOperation]{
	{v: RuntimePodDiskStats, means: "the pods' disk usage"},
	{v: RuntimeStopContainers, means: "a hard eviction's local stop"},
}

// runtimeOperationValues lists the values of evictd_runtime_errors_total's
// operation label.
func runtimeOperationValues() []RuntimeOperation { return valuesOf(runtimeOperations) }

// reclaimKinds are the kind label of evictd_reclaim_total and
// evictd_reclaimed_bytes_total.
var reclaimKinds = []value[decide.ReclaimKind]{
	{v: decide.ReclaimContainers, means: "dead containers and sandboxes"},
	{v: decide.ReclaimImages, means: "unused images"},
}

// ReclaimResult is the result label of evictd_reclaim_total.
type ReclaimResult string

// Reclaim results.
const (
	ReclaimOK     ReclaimResult = "ok"
	ReclaimFailed ReclaimResult = "failed"
)

var reclaimResults = []value[ReclaimResult]{
	{v: ReclaimOK},
	{v: ReclaimFailed, means: "wholly or in part"},
}

// reclaimResultValues lists the values of evictd_reclaim_total's result label.
func reclaimResultValues() []ReclaimResult { return valuesOf(reclaimResults) }
