package config

import (
	"fmt"
	"time"
)

// Durations that no flag sets but that the agent's derived durations use.
const (
	// podCleanupTimeout is the kubelet's podCleanupTimeout, 30s.
	podCleanupTimeout = 30 * time.Second
	// maxRuntimeRetry bounds the time between two attempts to reach the
	// container runtime, unless the housekeeping interval is longer.
	maxRuntimeRetry = time.Minute
)

// The bounds of --token-lifetime: the API server's shortest TokenRequest
// and deploy/policy.yaml's longest (kubeclient.MinTokenLifetime and
// MaxTokenLifetime; config does not import the API-server side).
const (
	minTokenLifetime = 10 * time.Minute
	maxTokenLifetime = 720 * time.Hour
)

// MinLeaseDuration is the shortest --lease-duration: renewed every quarter
// of it, a shorter Lease would be renewed more often than the kubelet
// renews its node Lease (every 10s of 40s).
const MinLeaseDuration = 20 * time.Second

// maxTimeToExhaustionMargin bounds --eviction-time-to-exhaustion-margin: a
// longer margin acts on any growth at all, which is no prediction.
const maxTimeToExhaustionMargin = time.Minute

// Durations are every period, age and timeout the agent runs with: the
// duration flags, validated, and what is derived from them. They are
// computed in one place, Options.durations; cmd/evictd hands each to the
// package that uses it, and no package derives one again. Defaults are for
// the flags' defaults.
type Durations struct {
	// HousekeepingInterval is the time between two passes of the loop
	// when nothing wakes it earlier (manager.Config.HousekeepingInterval).
	// --housekeeping-interval, positive. Default 10s.
	HousekeepingInterval time.Duration
	// MaxObservationAge is the age beyond which an observation is stale:
	// it still counts for node pressure but never triggers an eviction
	// (decide.DeciderConfig.MaxObservationAge). 2 × HousekeepingInterval,
	// default 20s: a reading from the last tick is fresh even when the
	// pass that reads it comes late, but one that two passes could not
	// renew is not.
	MaxObservationAge time.Duration
	// StuckAfter is how long after the last pass ended the loop counts as
	// stuck: /readyz and the systemd watchdog then fail, as they do when
	// the pass under way has run for longer than this plus the longest
	// an eviction may wait (manager.Config.StuckAfter). 3 ×
	// HousekeepingInterval, default 30s: a pass or two that run late
	// (a slow runtime, a busy node) are not a stuck loop.
	StuckAfter time.Duration
	// DiskStatsMaxAge is how long the pods' disk stats (writable layers
	// from the container runtime, log and volume directories walked) are
	// reused: cmd/evictd's disk cache gathers them in the background this
	// long after the last refresh ended, and cuts a refresh that takes
	// longer off; no pass waits for them. HousekeepingInterval × 9 / 10,
	// default 9s: under one interval, so a tick finds them about an
	// interval old at most.
	DiskStatsMaxAge time.Duration
	// RuntimeRetry and RuntimeRetryMax pace the attempts to reach a
	// container runtime that could not be reached at start: the first
	// comes RuntimeRetry later, then the wait doubles up to
	// RuntimeRetryMax, so a node with no runtime costs next to nothing.
	// RuntimeRetry is HousekeepingInterval (default 10s); RuntimeRetryMax
	// is max(HousekeepingInterval, 1m) (default 1m).
	RuntimeRetry    time.Duration
	RuntimeRetryMax time.Duration
	// RuntimeRequestTimeout bounds each request to the container runtime
	// (and the first dial at start). --runtime-request-timeout, positive.
	// Default 5s.
	RuntimeRequestTimeout time.Duration
	// VolumeStatsAggPeriod is how long a measurement of a pod's log and
	// volume directories is reused (cri.DiskStatsConfig.MaxAge).
	// --volume-stats-agg-period, not negative; 0 means the default.
	// Default 10s.
	VolumeStatsAggPeriod time.Duration
	// MinimumImageTTL is the minimum age of an image reclaim may delete
	// (reclaim.Config.MinImageAge). --minimum-image-ttl-duration, not
	// negative. Default 2m.
	MinimumImageTTL time.Duration
	// PressureTransitionPeriod is how long a pressure condition stays set
	// after its last threshold stops being met
	// (decide.DeciderConfig.TransitionPeriod).
	// --eviction-pressure-transition-period, not negative. Default 5m.
	PressureTransitionPeriod time.Duration
	// NodeStatusUpdateFrequency is how often the node's conditions and
	// taints are compared with evictd's (nodestatus.Config.UpdateFrequency).
	// --node-status-update-frequency, positive. Default 10s.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is the mean time between two writes of the
	// conditions when nothing changes (nodestatus.Config.ReportFrequency).
	// --node-status-report-frequency, positive and not below
	// NodeStatusUpdateFrequency. Default 5m.
	NodeStatusReportFrequency time.Duration
	// LeaseDuration is the duration of evictd's Lease, renewed every
	// quarter of it (lease.Config.Duration). --lease-duration, at least
	// MinLeaseDuration. Default 2m.
	LeaseDuration time.Duration
	// FastPollInterval is how often the memory working set is read while
	// a memory threshold is within FastPollMargin
	// (wakeup.MemoryConfig.FastPollInterval). --fast-poll-interval, not
	// negative; 0 disables the fast poll. Default 250ms.
	FastPollInterval time.Duration
	// TimeToExhaustionMargin is what time to exhaustion adds to the
	// measured release time (decide.ExhaustionConfig.Margin).
	// --eviction-time-to-exhaustion-margin, from 0 to
	// maxTimeToExhaustionMargin. Default 500ms.
	TimeToExhaustionMargin time.Duration
	// LocalKillAfter is how long a hard eviction retries an API server
	// that does not answer before it stops the pod's containers through
	// the CRI and owes the eviction (evict.Config.LocalKillAfter).
	// --local-kill-after, not negative; 0 disables. Default 5s.
	LocalKillAfter time.Duration
	// HardEvictionStopWait is how long a hard eviction's stop through the
	// CRI waits for the kubelet to take the evicted pod over
	// (evict.Config.StopWait). --hard-eviction-stop-wait, positive.
	// Default 1s.
	HardEvictionStopWait time.Duration
	// TokenRenewBefore is how long before its expiry the kubeconfig's
	// node-bound token is renewed (tokenrenew.RenewerConfig.RenewBefore).
	// --token-renew-before, not negative; 0 (default) means once a third
	// of its lifetime is left.
	TokenRenewBefore time.Duration
	// TokenLifetime is the lifetime asked for each renewed token
	// (tokenrenew.RenewerConfig.Lifetime). --token-lifetime, 0 (default:
	// the current token's own) or from kubeclient.MinTokenLifetime (10m)
	// to kubeclient.MaxTokenLifetime (720h).
	TokenLifetime time.Duration
	// CleanupTimeout bounds the wait for an evicted pod to go, after its
	// grace period: the Evicter's wait (evict.Config.CleanupTimeout) and
	// the loop's before it evicts again (manager.Config.CleanupTimeout).
	// No flag: 30s, the kubelet's podCleanupTimeout.
	CleanupTimeout time.Duration
}

// durations validates the duration flags, calling bad for each invalid
// one, and derives the others from them.
func (o *Options) durations(bad func(flag, value, why string)) Durations {
	for _, d := range []struct {
		flag     string
		v        time.Duration
		positive bool
	}{
		{"eviction-pressure-transition-period", o.pressureTransitionPeriod, false},
		{"minimum-image-ttl-duration", o.minimumImageTTL, false},
		{"node-status-update-frequency", o.nodeStatusUpdateFrequency, true},
		{"node-status-report-frequency", o.nodeStatusReportFrequency, true},
		{"housekeeping-interval", o.housekeepingInterval, true},
		{"runtime-request-timeout", o.runtimeTimeout, true},
		{"volume-stats-agg-period", o.volumeStatsAgg, false},
		{"fast-poll-interval", o.fastPollInterval, false},
		{"eviction-time-to-exhaustion-margin", o.exhaustionMargin, false},
		{"local-kill-after", o.localKillAfter, false},
		{"hard-eviction-stop-wait", o.stopWait, true},
		{"token-renew-before", o.tokenRenewBefore, false},
		{"token-lifetime", o.tokenLifetime, false},
	} {
		switch {
		case d.v < 0:
			bad(d.flag, d.v.String(), "must not be negative")
		case d.v == 0 && d.positive:
			bad(d.flag, d.v.String(), "must be positive")
		}
	}

	if o.nodeStatusUpdateFrequency > 0 && o.nodeStatusReportFrequency > 0 && o.nodeStatusReportFrequency < o.nodeStatusUpdateFrequency {
		bad("node-status-report-frequency", o.nodeStatusReportFrequency.String(),
			fmt.Sprintf("must not be below --node-status-update-frequency (%s)", o.nodeStatusUpdateFrequency))
	}
	if o.exhaustionMargin > maxTimeToExhaustionMargin {
		bad("eviction-time-to-exhaustion-margin", o.exhaustionMargin.String(), fmt.Sprintf("must be at most %s", maxTimeToExhaustionMargin))
	}
	if o.leaseDuration < MinLeaseDuration {
		bad("lease-duration", o.leaseDuration.String(), fmt.Sprintf("must be at least %s", MinLeaseDuration))
	}

	if l := o.tokenLifetime; l != 0 && (l < minTokenLifetime || l > maxTokenLifetime) {
		bad("token-lifetime", l.String(), fmt.Sprintf("must be 0 (the current token's own lifetime) or from %s to %s", minTokenLifetime, maxTokenLifetime))
	} else if l != 0 && o.tokenRenewBefore >= l {
		bad("token-renew-before", o.tokenRenewBefore.String(), fmt.Sprintf("must be below --token-lifetime (%s), or each token would be renewed as soon as it is written", l))
	}

	h := o.housekeepingInterval
	volumeStats := o.volumeStatsAgg
	if volumeStats == 0 {
		volumeStats = defaultVolumeStatsAggPeriod
	}
	return Durations{
		HousekeepingInterval:      h,
		MaxObservationAge:         2 * h,
		StuckAfter:                3 * h,
		DiskStatsMaxAge:           h * 9 / 10,
		RuntimeRetry:              h,
		RuntimeRetryMax:           max(h, maxRuntimeRetry),
		RuntimeRequestTimeout:     o.runtimeTimeout,
		VolumeStatsAggPeriod:      volumeStats,
		MinimumImageTTL:           o.minimumImageTTL,
		PressureTransitionPeriod:  o.pressureTransitionPeriod,
		NodeStatusUpdateFrequency: o.nodeStatusUpdateFrequency,
		NodeStatusReportFrequency: o.nodeStatusReportFrequency,
		LeaseDuration:             o.leaseDuration,
		FastPollInterval:          o.fastPollInterval,
		TimeToExhaustionMargin:    o.exhaustionMargin,
		LocalKillAfter:            o.localKillAfter,
		HardEvictionStopWait:      o.stopWait,
		TokenRenewBefore:          o.tokenRenewBefore,
		TokenLifetime:             o.tokenLifetime,
		CleanupTimeout:            podCleanupTimeout,
	}
}
