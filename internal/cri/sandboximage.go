package cri

import (
	"context"
	"encoding/json"
	"fmt"
)

// SandboxImage asks the runtime which image its pod sandboxes run (the
// "pause" image). No container lists it as its image, so reclaim must be
// told of it, or it would look unused. containerd reports it in the
// verbose status, under info["config"].sandboxImage.
func (c *Client) SandboxImage(ctx context.Context) (string, error) {
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	st, err := c.rs.Status(cctx, true)
	if err != nil {
		return "", fmt.Errorf("CRI Status at %s: %w", c.endpoint, err)
	}
	raw, ok := st.GetInfo()["config"]
	if !ok {
		return "", fmt.Errorf("CRI Status at %s: no config in the verbose status", c.endpoint)
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return "", fmt.Errorf("CRI Status at %s: config: %w", c.endpoint, err)
	}
	if cfg.SandboxImage == "" {
		return "", fmt.Errorf("CRI Status at %s: the config names no sandboxImage", c.endpoint)
	}
	return cfg.SandboxImage, nil
}
