package ranking

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// benchNode builds n pods of mixed QoS, priority and DaemonSet ownership with
// memory stats; one pod in 50 has none and one in 100 is static.
func benchNode(n int) ([]signals.Pod, map[string]signals.PodStats) {
	pods := make([]signals.Pod, n)
	stats := make(map[string]signals.PodStats, n)
	qos := []signals.QOSClass{signals.BestEffort, signals.Burstable, signals.Burstable, signals.Guaranteed}
	for i := range pods {
		p := signals.Pod{
			Namespace: fmt.Sprintf("ns-%d", i%17),
			Name:      fmt.Sprintf("pod-%d", i),
			UID:       fmt.Sprintf("uid-%d", i),
			QOS:       qos[i%len(qos)],
			Priority:  int32(i%5) * 100,
			DaemonSet: i%13 == 0,
			Static:    i%100 == 0,
		}
		if p.QOS != signals.BestEffort {
			p.MemoryRequest = int64(64+i%512) * Mi
		}
		pods[i] = p
		if i%50 != 0 {
			stats[p.UID] = signals.PodStats{UID: p.UID, MemoryWorkingSet: signals.Int64(int64(i*7919%1024) * Mi)}
		}
	}
	return pods, stats
}

func BenchmarkRank(b *testing.B) {
	for _, n := range []int{110, 1000, 10000} {
		pods, stats := benchNode(n)
		b.Run(fmt.Sprintf("memory/pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cands := Rank(signals.MemoryAvailable, signals.SingleFs, pods, stats)
				if _, ok := FirstEvictable(cands); !ok {
					b.Fatal("no evictable pod")
				}
			}
		})
	}
}

var sinkText string

// BenchmarkBytesText measures formatBytes beside resource.Quantity's
// String, which it is kept over, on the figures of a ranking's text.
func BenchmarkBytesText(b *testing.B) {
	vals := []int64{0, 512, 600 * Mi, 1536 * Mi, 923 * Mi, 12345 * 4096, -472 * Mi, 3 << 60}
	b.Run("formatBytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, v := range vals {
				sinkText = formatBytes(v)
			}
		}
	})
	b.Run("Quantity", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, v := range vals {
				sinkText = resource.NewQuantity(v, resource.BinarySI).String()
			}
		}
	})
}
