package recorder

import (
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/thresholds"
)

// Args are the flags with which `evictd simulate` replays a record as the
// agent decided it: every threshold as it is in force (the defaults and
// what was derived from the kubelet's configuration written out, and
// nothing merged or derived again), the grace periods, the minimum
// reclaims, the transition period, the housekeeping interval (which sets
// how old an observation may be), the memory.available semantics and,
// when on, time to exhaustion and its margin.
func Args(cfg decide.DeciderConfig, housekeeping time.Duration, hugepageAware bool) []string {
	var hard, soft, grace, reclaim []string
	for _, th := range cfg.Thresholds {
		if th.Soft {
			soft = append(soft, thresholds.Format(th))
			grace = append(grace, string(th.Signal)+"="+th.GracePeriod.String())
		} else {
			hard = append(hard, thresholds.Format(th))
		}
		if th.MinReclaim != nil {
			reclaim = append(reclaim, string(th.Signal)+"="+th.MinReclaim.String())
		}
	}
	args := []string{
		"--merge-default-eviction-settings=false",
		"--enforce-node-allocatable=",
		"--eviction-hard=" + strings.Join(hard, ","),
	}
	if len(soft) > 0 {
		args = append(args, "--eviction-soft="+strings.Join(soft, ","), "--eviction-soft-grace-period="+strings.Join(grace, ","))
	}
	if len(reclaim) > 0 {
		args = append(args, "--eviction-minimum-reclaim="+strings.Join(reclaim, ","))
	}
	args = WithLocalStorage(args, cfg.LocalStorageByKubelet)
	if cfg.Exhaustion.Enabled {
		args = append(args, "--eviction-time-to-exhaustion=true", "--eviction-time-to-exhaustion-margin="+cfg.Exhaustion.Margin.String())
	}
	return append(args,
		"--eviction-max-pod-grace-period="+strconv.FormatInt(cfg.MaxPodGracePeriodSeconds, 10),
		"--eviction-pressure-transition-period="+cfg.TransitionPeriod.String(),
		"--housekeeping-interval="+housekeeping.String(),
		"--feature-gates=HugepageAwareEviction="+strconv.FormatBool(hugepageAware),
	)
}

// WithLocalStorage is args with --local-storage-eviction set to the agent
// that evicted the pods over their own local-storage limits at the
// moment recorded (kubelet or evictd), in place of any earlier value: a
// replay has no node to decide it from.
func WithLocalStorage(args []string, byKubelet bool) []string {
	agent := "evictd"
	if byKubelet {
		agent = "kubelet"
	}
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if !strings.HasPrefix(a, "--local-storage-eviction=") {
			out = append(out, a)
		}
	}
	return append(out, "--local-storage-eviction="+agent)
}
