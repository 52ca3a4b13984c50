package thresholds

// Settings are the eviction settings as an operator writes them, in the
// kubelet's syntax, before parsing. A nil Hard map means "not set": the
// defaults apply. Each map carries the name of where it came from (a flag, a
// KubeletConfiguration key, a node-config.yaml key), so that errors and
// check-config can name it.
type Settings struct {
	// Hard is evictionHard / --eviction-hard: signal → "100Mi" or "10%",
	// or for a memory.pressure.* stall signal ">20" (the operator kept on
	// the value, as the flag "memory.pressure.full.avg10>20" is split).
	Hard       map[string]string
	HardSource string
	// Soft is evictionSoft / --eviction-soft.
	Soft       map[string]string
	SoftSource string
	// SoftGracePeriod is evictionSoftGracePeriod: signal → Go duration.
	SoftGracePeriod       map[string]string
	SoftGracePeriodSource string
	// MinimumReclaim is evictionMinimumReclaim: signal → quantity or percent.
	MinimumReclaim       map[string]string
	MinimumReclaimSource string
	// MergeDefaults adds every default hard threshold missing from a
	// partial Hard map (mergeDefaultEvictionSettings).
	MergeDefaults bool
	// EnforceNodeAllocatable is --enforce-node-allocatable; "pods" derives
	// allocatableMemory.available from each hard memory.available threshold.
	// Parse does not default it: nil or empty enforces nothing, so the
	// config reader must fill in the kubelet's default, ["pods"], when the
	// operator left the setting out.
	EnforceNodeAllocatable []string
	// EnforceNodeAllocatableSource names where EnforceNodeAllocatable came
	// from ("enforceNodeAllocatable in /etc/kubernetes/kubelet.yaml"), so
	// that an error about it names the file. Empty, or the flag itself, for
	// the flag and the default: the kubelet's texts already name the flag.
	EnforceNodeAllocatableSource string
}
