package testruntime

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// CNIPluginDir is where Debian's containernetworking-plugins package puts
// the CNI plugins (hack/install-runtime.sh installs it).
const CNIPluginDir = "/usr/lib/cni"

// cniPlugins are the plugins the pod network uses.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// podNetwork is the CNI network of one runtime: a Linux bridge of its own
// with no address on the host (no gateway, no masquerading, no routes), so
// pods get an address and a working network namespace without touching the
// machine's routing, and two runtimes never share a bridge.
type podNetwork struct {
	bridge string // the bridge's name, "evd" + 8 hex digits (at most 15 bytes)
	subnet string
}

func newPodNetwork() (podNetwork, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return podNetwork{}, err
	}
	return podNetwork{bridge: "evd" + hex.EncodeToString(b), subnet: "10.244.0.0/24"}, nil
}

// write puts the plugins (as symbolic links) into cniDir/bin and the network
// list into cniDir/net.d, with host-local's leases under cniDir/ipam.
func (n podNetwork) write(cniDir string) error {
	for _, p := range cniPlugins {
		src := filepath.Join(CNIPluginDir, p)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("CNI plugin %s: %w", p, ErrNotInstalled)
		}
		if err := os.Symlink(src, filepath.Join(cniDir, "bin", p)); err != nil {
			return err
		}
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "evictd-test",
		"plugins": []any{map[string]any{
			"type":      "bridge",
			"bridge":    n.bridge,
			"isGateway": false,
			"ipMasq":    false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": n.subnet}}},
				"dataDir": filepath.Join(cniDir, "ipam"),
			},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cniDir, "net.d", "10-evictd-test.conflist"), data, 0o644)
}

// remove deletes the bridge, if the bridge plugin created it.
func (n podNetwork) remove() error {
	if n.bridge == "" {
		return nil
	}
	if _, err := net.InterfaceByName(n.bridge); err != nil {
		return nil // never created, or already gone
	}
	if _, err := runCommand("ip", "link", "delete", n.bridge); err != nil {
		return fmt.Errorf("delete bridge %s: %w", n.bridge, err)
	}
	return nil
}
