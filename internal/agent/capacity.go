package agent

import (
	"context"
	"time"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// CheckCapacities observes the node's signals once and compares the
// thresholds in force (containerfs ones included) with their capacities
// (config.CheckCapacity). Signals that cannot be read are not checked.
func CheckCapacities(ctx context.Context, cfg *config.Config, sources []signals.Source, layout signals.FsLayout) ([]string, error) {
	obs, _ := signals.Collect(ctx, time.Now(), sources)
	signals.DeriveContainerFs(obs, layout)
	return config.CheckCapacity(thresholds.DeriveContainerFs(cfg.Thresholds, layout), obs)
}
