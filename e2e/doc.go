// Package e2e is the home of evictd's end-to-end tests, in tiers by what
// they start. Every tier runs the built binary, $EVICTD_BIN (`make build`;
// each tier's make target sets it), never the test binary in its place,
// and starts what it needs itself (a control plane, containerd, a
// kubelet, a guest); a test skips when this machine lacks what it needs
// (root, cgroup v1, the binaries, qemu).
//
//	tier           starts                                           make target
//	e2e/host       evictd alone on this host                         e2e-host
//	e2e/apiserver  a real kube-apiserver (and containerd for disk);  e2e-apiserver
//	               the test plays the kubelet
//	e2e/node       a real kubelet on containerd, whole control       e2e-node (e2e)
//	               plane; one also in a cgroup v2 guest
//	e2e/guest      a cgroup v2 qemu guest, evictd alone or under     e2e-guest
//	               systemd as PID 1
//
// `make test` runs host, apiserver and guest with every other package
// (make test-tier1, at a lower CPU priority) beside node (make e2e-run):
// each node has its own runtime, API server, ports, bridge and cgroups,
// and its thresholds are on its own kubepods cgroup and loop-mounted
// disks, so no other test's memory or files move them. The chaos matrix's
// clock step, which every process on the machine sees, runs after tier 1
// (make e2e-clock). `make test-v2` runs every test that boots a guest: the
// guest tier and the node tier's TestKubeletV2Node.
//
// Where two tiers test the same area they assert different things.
//
// Memory. e2e/apiserver's TestAPIServerE2E, its kubelet being the test,
// pins what a real kubelet blurs: the exact set of pods that ever got a
// deletionTimestamp (critical and static pods never); the grace period
// asked for, read from the pod's first terminating version; the condition
// and taint written before the eviction is issued, and cleared exactly
// once, no sooner than the transition period after the last pass that met
// a threshold (from the hold message and the decision log); a PDB's
// refusal counted for soft and ignored for hard; an API server outage
// mid-pressure with the late transition event and the catch-up bounded by
// the retry's cap; no API error while the API server is up, and RBAC that
// refuses Secrets and pod creation; every log line one JSON object with no
// key twice. e2e/node's TestMemoryNode, TestControllersNode and
// TestAPIServerFaults run the same kinds of pressure beside a real kubelet
// and containerd: the kernel OOM-kills nothing before evictd's eviction
// takes effect, the kubelet's own pod lifecycle and status, a PDB whose
// status a real controller computes, a ReplicaSet's pod recreated, PIDs,
// evictd restarted under pressure, the hard stop through the CRI.
//
// Disk. e2e/apiserver's TestDiskE2E, with a real containerd and no
// kubelet, covers what a real node's one filesystem cannot set up: a
// dedicated imagefs relieved by removing unused images alone, with no
// eviction; dead containers removed, their bytes bounded by the metric;
// an emptyDir hog evicted with the kubelet's exact message; a Guaranteed
// pod holding five times the inodes of a BestEffort one kept while the
// BestEffort one goes; pods over their ephemeral-storage limit or
// emptyDir sizeLimit evicted with no threshold met. e2e/node's
// TestDiskNode fills a real node's one filesystem through real pods:
// unused images removed first, then, that not being enough, the pod that
// uses the most local storage evicted through the real kubelet with its
// Evicted event, and likewise a pod exhausting inodes, the Burstable
// writer kept.
//
// cgroup v2. e2e/guest's TestCgroupV2Node runs evictd standalone in
// dry-run: its signals against the kernel's files read before and after,
// pod discovery and stats in the cgroupfs and systemd layouts, both PSI
// triggers and memory.events firing, the deciding pass started by a
// wake-up. TestSystemdNode runs `make install`'s unit under systemd:
// notify, sandbox, cgroup limits, watchdog, clean stop. e2e/node's
// TestKubeletV2Node runs a whole node in the guest: the kubelet's own
// layout and container scopes, an eviction through the API server before
// kubepods OOMs, the node's condition and taint; with the systemd driver
// also the v1 twins of the soft-threshold, PID, evictd-restart (by
// systemd), disk and static-pod scenarios. e2e/host's
// TestAgentReportsThisHost compares the same figures with this host's
// cgroup v1 files.
//
// systemd. e2e/host's TestAgentNotifiesSystemd and TestAgentWaitsForItsPort
// read the notify protocol on a socket of their own (READY=1, watchdog
// pings while the port is taken, STOPPING=1 on SIGTERM), and
// TestMakeInstall checks the files' modes and that an edited environment
// file is kept; e2e/guest's TestSystemdNode has a real systemd act on the
// installed unit: the start, the sandbox, the watchdog's restart of a
// stalled evictd.
package e2e
