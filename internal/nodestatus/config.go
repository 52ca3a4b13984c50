package nodestatus

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// HeartbeatInterval is the longest time between two writes of the
	// conditions when nothing changes, and the cap of the retry backoff
	// (--node-status-update-frequency, 10s by default).
	HeartbeatInterval time.Duration
	// Clock drives heartbeats and retries (the real clock by default).
	Clock clock.WithTicker
	// OnAPIError, when set, is called from the publisher's goroutine with
	// the request (metrics.APINodeGet, APINodePatch or APINodeUpdate) of
	// every API request that failed, conflicts included (main counts them
	// in evictd_api_errors_total).
	OnAPIError func(verb metrics.APIVerb)
}

// Defaults used for the fields of Config left empty.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultTaintEffect       = v1.TaintEffectNoSchedule
)

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
	case cfg.HeartbeatInterval == 0:
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	case cfg.HeartbeatInterval < 0:
		return cfg, fmt.Errorf("node status: node status update frequency %s must be positive", cfg.HeartbeatInterval)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnAPIError == nil {
		cfg.OnAPIError = func(metrics.APIVerb) {}
	}
	return cfg, nil
}
