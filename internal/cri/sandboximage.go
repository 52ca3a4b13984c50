package cri

import (
	"context"
	"encoding/json"
	"fmt"
)

// SandboxImage returns the image the runtime's pod sandboxes run (the
// "pause" image) when the runtime names it, and "" when it does not. No
// container lists that image as its own, so reclaim must be told of it or
// it would look unused.
//
// containerd 1.x names it in its verbose status, under
// info["config"].sandboxImage. containerd 2 names it nowhere the CRI shows
// (it is the images plugin's pinned_images.sandbox) and reports it Pinned
// in ListImages instead, as CRI-O reports its pause_image; reclaim keeps
// every pinned image, as the kubelet's image garbage collection does.
// An error means the runtime's answer could not be read: the caller cannot
// tell which image is the sandbox's.
func (c *Client) SandboxImage(ctx context.Context) (string, error) {
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	st, err := c.rs.Status(cctx, true)
	if err != nil {
		return "", fmt.Errorf("CRI Status at %s: %w", c.endpoint, err)
	}
	return sandboxImageOf(st.GetInfo(), c.endpoint)
}

// sandboxImageOf reads the sandbox image from a verbose status's info: ""
// when its config names none (or there is no config), an error when the
// config is not the JSON object it should be.
func sandboxImageOf(info map[string]string, endpoint string) (string, error) {
	raw, ok := info["config"]
	if !ok {
		return "", nil
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return "", fmt.Errorf("CRI Status at %s: its verbose info's config %.80q: %w", endpoint, raw, err)
	}
	return cfg.SandboxImage, nil
}
