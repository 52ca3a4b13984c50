package testvm

import (
	"runtime"
	"time"
)

// TouchTime is how long it takes to allocate and touch mib MiB of new
// memory, page by page: what a growing pod costs the kernel. Its ratio in
// a guest to this machine's is the guest's slowdown, by which benchmarks
// scale their allocation rates (TCG's speed varies from run to run, so
// both sides measure it in the same run).
func TouchTime(mib int) time.Duration {
	start := time.Now()
	held := make([][]byte, 0, mib)
	for range mib {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	d := time.Since(start)
	runtime.KeepAlive(held)
	return d
}
