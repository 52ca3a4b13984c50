package agent

import (
	"context"
	"time"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
)

// CheckCapacities observes the node's signals once and compares the
// thresholds in force (containerfs ones included) with their capacities
// (config.CheckCapacity): warnings, and the thresholds that cannot hold on
// this node, which the agent sets aside. Signals that cannot be read are
// not checked.
func CheckCapacities(ctx context.Context, cfg *config.Config, sources []signals.Source, layout signals.FsLayout) ([]string, []config.SetAside) {
	obs, _ := signals.Collect(ctx, time.Now(), sources)
	signals.DeriveContainerFs(obs, layout)
	return config.CheckCapacity(cfg.Thresholds, obs, layout)
}
