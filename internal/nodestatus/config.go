package nodestatus

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// Config says which node evictd writes, under which names, and how often.
type Config struct {
	// NodeName is the Node object evictd writes (--hostname-override, else
	// the host name). Required.
	NodeName string
	// ConditionTypes names evictd's node condition for each kind of
	// pressure. Kinds left out get the defaults: EvictdMemoryPressure,
	// EvictdDiskPressure, EvictdPIDPressure. The kubelet's own condition
	// types are refused: evictd never writes them.
	ConditionTypes map[signals.Pressure]v1.NodeConditionType
	// TaintKeys names evictd's taint for each kind of pressure. Kinds left
	// out get the defaults: evictd.io/memory-pressure,
	// evictd.io/disk-pressure, evictd.io/pid-pressure. Keys under
	// node.kubernetes.io/ are refused: the node lifecycle controller owns them.
	TaintKeys map[signals.Pressure]string
	// TaintEffect is the effect of evictd's taints: NoSchedule (the
	// default), PreferNoSchedule or NoExecute.
	TaintEffect v1.TaintEffect
	// UpdateFrequency is how often the publisher compares the node, as
	// its watch shows it, with evictd's state, without a request; it
	// writes only what differs (--node-status-update-frequency, 10s by
	// default).
	UpdateFrequency time.Duration
	// ReportFrequency is the mean time between two writes of the
	// conditions when nothing changes: each period is jittered by ±50%,
	// as the kubelet's nodeStatusReportFrequency
	// (--node-status-report-frequency, 5m by default).
	ReportFrequency time.Duration
	// Jitter returns the report period to wait after a write, given
	// ReportFrequency: uniform in [0.5, 1.5) × ReportFrequency by default.
	// Tests fix it.
	Jitter func(time.Duration) time.Duration
	// Retry is the schedule of retries after a failed write. Default:
	// 1s doubling to 8s, each delay stretched by up to 100% at random,
	// so that a fleet returning from an API server outage spreads its
	// writes over about 16 seconds.
	Retry wait.Backoff
	// Clock drives reports and retries (the real clock by default).
	Clock clock.WithTicker
	// OnAPIError, when set, is called from the publisher's goroutine with
	// the request (metrics.APINodePatch or APINodeTaints) of every API
	// request that failed, conflicts included (main counts them in
	// evictd_api_errors_total).
	OnAPIError func(verb metrics.APIVerb)
}

// Defaults used for the fields of Config left empty.
const (
	DefaultUpdateFrequency = 10 * time.Second
	DefaultReportFrequency = 5 * time.Minute
	DefaultTaintEffect     = v1.TaintEffectNoSchedule
)

// DefaultRetry is Config.Retry's default.
var DefaultRetry = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 8 * time.Second}

// reportJitter is the kubelet's jitter of nodeStatusReportFrequency: a
// period uniform in [0.5, 1.5) × d, so that nodes started together do not
// write together.
func reportJitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

// defaultConditionTypes and defaultTaintKeys are the names SPEC.md gives.
var (
	defaultConditionTypes = map[signals.Pressure]v1.NodeConditionType{
		signals.MemoryPressure: "EvictdMemoryPressure",
		signals.DiskPressure:   "EvictdDiskPressure",
		signals.PIDPressure:    "EvictdPIDPressure",
	}
	defaultTaintKeys = map[signals.Pressure]string{
		signals.MemoryPressure: "evictd.io/memory-pressure",
		signals.DiskPressure:   "evictd.io/disk-pressure",
		signals.PIDPressure:    "evictd.io/pid-pressure",
	}
)

// kubeletConditions are the node conditions the kubelet (and the node
// lifecycle controller) own; evictd must not write them.
var kubeletConditions = []v1.NodeConditionType{
	v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeNetworkUnavailable,
}

// pressureNames spell each kind of pressure in reasons: EvictdHasMemoryPressure.
var pressureNames = map[signals.Pressure]string{
	signals.MemoryPressure: "Memory",
	signals.DiskPressure:   "Disk",
	signals.PIDPressure:    "PID",
}

// complete returns cfg with defaults filled in, or an error naming the
// first invalid field and its value.
func (cfg Config) complete() (Config, error) {
	if cfg.NodeName == "" {
		return cfg, errors.New("node status: node name is required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return cfg, fmt.Errorf("node status: node name %q: %s", cfg.NodeName, strings.Join(errs, "; "))
	}
	conds := maps.Clone(defaultConditionTypes)
	for p, t := range cfg.ConditionTypes {
		conds[p] = t
	}
	keys := maps.Clone(defaultTaintKeys)
	for p, k := range cfg.TaintKeys {
		keys[p] = k
	}
	seenCond := map[v1.NodeConditionType]signals.Pressure{}
	seenKey := map[string]signals.Pressure{}
	for _, p := range signals.Pressures() {
		t, k := conds[p], keys[p]
		if errs := validation.IsQualifiedName(string(t)); len(errs) > 0 {
			return cfg, fmt.Errorf("node status: condition type %q for %s pressure: %s", t, p, strings.Join(errs, "; "))
		}
		for _, kc := range kubeletConditions {
			if t == kc {
				return cfg, fmt.Errorf("node status: condition type %q for %s pressure belongs to the kubelet; evictd needs its own", t, p)
			}
		}
		if q, dup := seenCond[t]; dup {
			return cfg, fmt.Errorf("node status: condition type %q is given for both %s and %s pressure", t, q, p)
		}
		seenCond[t] = p
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return cfg, fmt.Errorf("node status: taint key %q for %s pressure: %s", k, p, strings.Join(errs, "; "))
		}
		if strings.HasPrefix(k, "node.kubernetes.io/") {
			return cfg, fmt.Errorf("node status: taint key %q for %s pressure belongs to the node lifecycle controller; evictd needs its own", k, p)
		}
		if q, dup := seenKey[k]; dup {
			return cfg, fmt.Errorf("node status: taint key %q is given for both %s and %s pressure", k, q, p)
		}
		seenKey[k] = p
	}
	for p := range conds {
		if _, ok := pressureNames[p]; !ok {
			return cfg, fmt.Errorf("node status: unknown pressure %q in condition types (want memory, disk or pid)", p)
		}
	}
	for p := range keys {
		if _, ok := pressureNames[p]; !ok {
			return cfg, fmt.Errorf("node status: unknown pressure %q in taint keys (want memory, disk or pid)", p)
		}
	}
	cfg.ConditionTypes, cfg.TaintKeys = conds, keys

	switch cfg.TaintEffect {
	case "":
		cfg.TaintEffect = DefaultTaintEffect
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
	default:
		return cfg, fmt.Errorf("node status: taint effect %q: want NoSchedule, PreferNoSchedule or NoExecute", cfg.TaintEffect)
	}
	switch {
	case cfg.UpdateFrequency == 0:
		cfg.UpdateFrequency = DefaultUpdateFrequency
	case cfg.UpdateFrequency < 0:
		return cfg, fmt.Errorf("node status: node status update frequency %s must be positive", cfg.UpdateFrequency)
	}
	switch {
	case cfg.ReportFrequency == 0:
		cfg.ReportFrequency = DefaultReportFrequency
	case cfg.ReportFrequency < 0:
		return cfg, fmt.Errorf("node status: node status report frequency %s must be positive", cfg.ReportFrequency)
	}
	if cfg.Jitter == nil {
		cfg.Jitter = reportJitter
	}
	if cfg.Retry.Duration <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnAPIError == nil {
		cfg.OnAPIError = func(metrics.APIVerb) {}
	}
	return cfg, nil
}
