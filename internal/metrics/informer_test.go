package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeInformer struct {
	heard   time.Time
	relists int64
}

func (f *fakeInformer) LastHeard() time.Time { return f.heard }
func (f *fakeInformer) Relists() int64       { return f.relists }

func TestRegisterInformer(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	inf := &fakeInformer{}
	reg := prometheus.NewRegistry()
	if err := RegisterInformer(reg, "pods", inf, func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	check := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "evictd_informer_last_heard_seconds", "evictd_informer_relists_total"); err != nil {
			t.Error(err)
		}
	}
	const help = `# HELP evictd_informer_last_heard_seconds Seconds since the informer of resource (pods) last heard from the API server: a list, or any watch event, bookmarks included (about one a minute on a quiet watch); -1 before it ever did.
# TYPE evictd_informer_last_heard_seconds gauge
`
	const relHelp = `# HELP evictd_informer_relists_total Relists that replaced the cache of the informer of resource (pods): its watch silent while the API server answered, or a pod the API server said was gone still in the cache.
# TYPE evictd_informer_relists_total counter
`
	check(help + "evictd_informer_last_heard_seconds{resource=\"pods\"} -1\n" + relHelp + "evictd_informer_relists_total{resource=\"pods\"} 0\n")
	inf.heard, inf.relists = now.Add(-90*time.Second), 2
	check(help + "evictd_informer_last_heard_seconds{resource=\"pods\"} 90\n" + relHelp + "evictd_informer_relists_total{resource=\"pods\"} 2\n")
	if err := RegisterInformer(reg, "pods", inf, nil); err == nil {
		t.Error("a second registration for pods: no error")
	}
}
