package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/evictd/evictd/signals"
)

// DiscoverPods lists the pod cgroups under the kubepods cgroup that cfg
// names, in all three QoS tiers, for standalone mode where there is no API
// server to list pods. Each pod has its UID and QOS, Name "pod<uid>" and an
// empty Namespace; nothing else is known of it. A missing kubepods cgroup is
// an error; a missing burstable or besteffort tier only has no pods.
func DiscoverPods(cfg Config) ([]signals.Pod, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	v, err := cg.version()
	if err != nil {
		return nil, fmt.Errorf("discover pods: %w", err)
	}
	tiers := []struct {
		qos  signals.QOSClass
		name cgroupName
	}{
		{signals.Guaranteed, cg.kubepods},
		{signals.Burstable, cg.kubepods.child(tierBurstable)},
		{signals.BestEffort, cg.kubepods.child(tierBestEffort)},
	}
	var pods []signals.Pod
	var errs []error
	for i, tier := range tiers {
		dir := cg.memoryDir(v, tier.name)
		entries, err := os.ReadDir(dir)
		if err != nil {
			if i > 0 && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			errs = append(errs, fmt.Errorf("discover %s pods: read %s: %w", tier.qos, dir, err))
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			comp, ok := tier.name.childComponent(cg.driver, e.Name())
			uid, isPod := strings.CutPrefix(comp, "pod")
			if !ok || !isPod || uid == "" {
				continue
			}
			pods = append(pods, signals.Pod{Name: "pod" + uid, UID: uid, QOS: tier.qos})
		}
	}
	return pods, errors.Join(errs...)
}
