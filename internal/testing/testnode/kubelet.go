package testnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// KubeletOptions is the kubelet's side of the eviction work.
type KubeletOptions struct {
	// EvictionHard is the kubelet's evictionHard. Nil disables every
	// threshold of the kubelet's eviction manager ("0%" for each signal),
	// which is how the kubelet runs beside evictd.
	EvictionHard map[string]string
	// Config holds more KubeletConfiguration fields, set over the node's
	// (e.g. "evictionPressureTransitionPeriod": "5s",
	// "kernelMemcgNotification": true).
	Config map[string]any
	// ConfigDir is the kubelet's --config-dir: a directory of *.conf
	// KubeletConfiguration drop-ins merged over its file, in lexical
	// order. Empty: none.
	ConfigDir string
}

// KubeletConfigPath returns the path of the kubelet's configuration file
// (its --config), a KubeletConfiguration in JSON.
func (n *Node) KubeletConfigPath() string { return filepath.Join(n.dir, "kubelet-config.json") }

// disabledEviction turns off every threshold of the kubelet: "0%" is
// ignored, and a hard memory.available that is ignored derives no
// allocatableMemory.available.
var disabledEviction = map[string]string{
	"memory.available":   "0%",
	"nodefs.available":   "0%",
	"nodefs.inodesFree":  "0%",
	"imagefs.available":  "0%",
	"imagefs.inodesFree": "0%",
}

// kubeletConfig returns the KubeletConfiguration of the node's kubelet.
func (n *Node) kubeletConfig(port, healthzPort int) map[string]any {
	hard := n.kcfg.EvictionHard
	if hard == nil {
		hard = disabledEviction
	}
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// This machine has cgroup v1, which kubelets since 1.35 refuse unless told.
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"cgroupDriver":             n.cgroupDriver(),
		"cgroupRoot":               n.cgroupRoot,
		"cgroupsPerQOS":            true,
		"containerRuntimeEndpoint": n.runtime.Endpoint(),
		"podLogsDir":               n.podLogsDir,
		"address":                  "127.0.0.1",
		"port":                     port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              healthzPort,
		// Bound to loopback, for tests only.
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":          map[string]any{"mode": "AlwaysAllow"},
		"enforceNodeAllocatable": []string{"pods"},
		"systemReserved":         map[string]string{"memory": strconv.FormatInt(n.SystemReserved(), 10)},
		"evictionHard":           hard,
		// The node's disk is the evictor's to manage (the kubelet's image
		// garbage collector would race the disk scenarios); 100 turns it off.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"serializeImagePulls":         false,
		"resolvConf":                  "",
	}
	maps.Copy(cfg, n.kcfg.Config)
	return cfg
}

// cgroupDriver is the cgroup driver of the kubelet, runc and evictd.
func (n *Node) cgroupDriver() string {
	if n.opts.SystemdDriver {
		return "systemd"
	}
	return "cgroupfs"
}

// startKubelet writes the kubelet's config and kubeconfig and starts it on
// free loopback ports, then waits until the node is Ready. n.mu is held.
func (n *Node) startKubelet(ctx context.Context) error {
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(n.kubeletConfig(ports[0], ports[1]), "", "  ")
	if err != nil {
		return err
	}
	cfgPath := n.KubeletConfigPath()
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	if n.opts.ControlPlane != nil {
		kubeconfig = n.opts.ControlPlane.Kubelet
	} else if err := n.cluster.WriteKubeconfig(kubeconfig, n.cluster.Token(NodeUser(n.name))); err != nil {
		return err
	}
	bin, err := testcluster.Binary("kubelet")
	if err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.rootDir,
		"--hostname-override=" + n.name,
		"--node-ip=127.0.0.1",
		"--v=2",
	}
	if n.kcfg.ConfigDir != "" {
		args = append(args, "--config-dir="+n.kcfg.ConfigDir)
	}
	p, err := childproc.Start("kubelet", bin, args, n.logPath("kubelet"))
	if err != nil {
		return err
	}
	n.kubelet = p
	if err := n.waitKubelet(ctx, p, ports[1]); err != nil {
		return errors.Join(err, p.Stop(termGrace))
	}
	return nil
}

// waitKubelet waits until the kubelet's healthz answers and the node is
// Ready (its runtime and network ready) with the configuration just given.
func (n *Node) waitKubelet(ctx context.Context, p *childproc.Process, healthzPort int) error {
	started := metav1.Now()
	healthz := "http://127.0.0.1:" + strconv.Itoa(healthzPort) + "/healthz"
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, n.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, p.ExitError()
		}
		if err := httpOK(ctx, healthz); err != nil {
			last = err.Error()
			return false, nil
		}
		node, err := n.admin.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				last = fmt.Sprintf("node Ready=%s (%s), heartbeat %s", c.Status, c.Message, c.LastHeartbeatTime.Format(time.RFC3339))
				// A heartbeat older than this start is an earlier kubelet's.
				return c.Status == v1.ConditionTrue && !c.LastHeartbeatTime.Before(&metav1.Time{Time: started.Truncate(time.Second)}), nil
			}
		}
		last = "node has no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kubelet (pid %d) not ready after %s: %v (%w); last lines of %s:\n%s",
			p.PID(), n.opts.ReadyTimeout, last, err, p.LogPath, childproc.Tail(p.LogPath, 30))
	}
	return nil
}

// RestartKubelet stops the kubelet and starts it again with opts, on the
// same node, runtime and pods, and waits until the node is Ready again.
func (n *Node) RestartKubelet(ctx context.Context, opts KubeletOptions) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return errors.New("node stopped")
	}
	if n.kubelet != nil {
		if err := n.kubelet.Stop(termGrace); err != nil {
			return err
		}
		n.kubelet = nil
	}
	n.kcfg = opts
	return n.startKubelet(ctx)
}

// KubeletPID returns the kubelet's process ID, or 0 when it is not running.
func (n *Node) KubeletPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.kubelet == nil || n.kubelet.Exited() {
		return 0
	}
	return n.kubelet.PID()
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
