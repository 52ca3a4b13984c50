package main

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/lease"
)

// What check-config says of values that internal/config accepts but that
// look wrong: valid, so the agent starts, but likely not what the
// operator meant. internal/config has already rejected the invalid ones
// (validate.go, durations.go) and warned of soft thresholds behind their
// hard ones (contradict.go); nothing here says that again.

// Bounds beyond which a valid value is suspicious.
const (
	// longTransition: a condition and taint held this long after the
	// pressure ended keep pods off a node that has room for them.
	longTransition = time.Hour
	// longMaxPodGrace: a soft eviction that may wait longer than this
	// leaves the node under pressure for as long.
	longMaxPodGrace = 300
	// longLease: a dead evictd looks alive for up to this long.
	longLease = 10 * time.Minute
	// maxLeaseName is the longest Lease name, a DNS subdomain.
	maxLeaseName = 253
)

// suspicious returns the warnings and notes of cfg's values that are
// valid but look wrong.
func suspicious(cfg *config.Config) (warnings, notes []string) {
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	src := func(flag string) string {
		if s, ok := cfg.Sources[flag]; ok {
			return s
		}
		return "--" + flag
	}

	// The pressure transition period.
	switch p := cfg.PressureTransitionPeriod; {
	case p == 0:
		warn("%s is 0s: a pressure condition and its taint clear as soon as the last threshold stops being met, and flap with a signal that hovers at it (the kubelet's default is 5m0s)", src("eviction-pressure-transition-period"))
	case p < cfg.HousekeepingInterval:
		warn("%s (%s) is shorter than --housekeeping-interval (%s): a pressure condition can clear between two passes and flap", src("eviction-pressure-transition-period"), p, cfg.HousekeepingInterval)
	case p > longTransition:
		warn("%s (%s) is over %s: the pressure condition and taint keep pods off the node that long after the pressure ended", src("eviction-pressure-transition-period"), p, longTransition)
	}

	// The soft evictions' grace period.
	soft := false
	for _, th := range cfg.Thresholds {
		soft = soft || th.Soft
	}
	switch g := cfg.MaxPodGracePeriodSeconds; {
	case !soft && g != 0:
		note("%s (%d) has no effect: no soft threshold is set", src("eviction-max-pod-grace-period"), g)
	case soft && g < 0:
		warn("%s is %d: a soft eviction waits for the pod's own terminationGracePeriodSeconds, however long, while the node stays under pressure", src("eviction-max-pod-grace-period"), g)
	case soft && g > longMaxPodGrace:
		warn("%s is %ds: a soft eviction may leave the node under pressure for over %ds", src("eviction-max-pod-grace-period"), g, longMaxPodGrace)
	}

	// The runtime endpoints: a unix:// URL internal/config accepts, but
	// with parts the dialer ignores or a path that names no socket.
	for _, ep := range []struct{ flag, v string }{
		{"container-runtime-endpoint", cfg.ContainerRuntimeEndpoint},
		{"image-service-endpoint", cfg.ImageServiceEndpoint},
	} {
		if ep.flag == "image-service-endpoint" && ep.v == cfg.ContainerRuntimeEndpoint {
			continue
		}
		if w := endpointWarning(ep.v); w != "" {
			warn("%s %q: %s", src(ep.flag), ep.v, w)
		}
	}

	// The node name, which names evictd's Lease.
	if lease := lease.Name(cfg.NodeName); len(lease) > maxLeaseName {
		warn("node name %q makes evictd's Lease name %d characters long, over the %d a name may have: the agent cannot create its Lease", cfg.NodeName, len(lease), maxLeaseName)
	}
	if cfg.NodeName == "localhost" || strings.HasPrefix(cfg.NodeName, "localhost.") {
		how := "--hostname-override"
		if _, ok := cfg.Sources["hostname-override"]; !ok {
			how = "the machine's hostname (set --hostname-override)"
		}
		warn("node name %q, from %s, is every unnamed machine's: the kubelet registers the node under its own name", cfg.NodeName, how)
	}

	// The Lease.
	if cfg.LeaseDuration > longLease {
		warn("%s (%s) is over %s: a stopped evictd still looks alive that long", src("lease-duration"), cfg.LeaseDuration, longLease)
	}
	if cfg.LeaseNamespace != "kube-system" {
		note("%s is %s: deploy/rbac.yaml grants the Lease in kube-system; bind its Role evictd-lease in %s", src("lease-namespace"), cfg.LeaseNamespace, cfg.LeaseNamespace)
	}

	// The rate limits.
	switch {
	case cfg.MaxEvictionsPerHour == 0:
		warn("%s is 0: no cap on evictions, so pressure that no eviction relieves (a leak outside the pods) can evict pod after pod until the node is empty", src("max-evictions-per-hour"))
	case cfg.LocalStorageEvictionQPS > 0 && cfg.LocalStorageEvictionBurst > cfg.MaxEvictionsPerHour:
		warn("%s (%d) is above %s (%d): the cap stops a burst before it is spent", src("local-storage-eviction-burst"), cfg.LocalStorageEvictionBurst, src("max-evictions-per-hour"), cfg.MaxEvictionsPerHour)
	}
	if cfg.LocalStorageEvictionQPS == 0 {
		note("%s is 0: every pod over its own local-storage limit is evicted in one pass, as the kubelet does", src("local-storage-eviction-qps"))
	}
	if cfg.DryRun {
		note("--dry-run is set: the agent decides and reports, but evicts, reclaims, taints and posts nothing")
	}
	return warnings, notes
}

// endpointWarning says what is wrong with a CRI endpoint that
// internal/config accepted (a unix:// URL with an absolute path), or "".
func endpointWarning(ep string) string {
	u, err := url.Parse(ep)
	if err != nil {
		return err.Error()
	}
	switch {
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(ep, "?") || strings.HasSuffix(ep, "#"):
		return "a query or fragment is no part of a socket path"
	case path.Clean(u.Path) != u.Path:
		return fmt.Sprintf("the path is not clean (%s)", path.Clean(u.Path))
	case !strings.HasSuffix(u.Path, ".sock"):
		return "the path does not end in .sock, as containerd's and CRI-O's sockets do"
	}
	return ""
}
