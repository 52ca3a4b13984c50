package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Informer is what RegisterInformer reads of one informer: when it last
// heard from the API server (a list, or any watch event, bookmarks
// included; the zero time if never) and how many times it relisted.
type Informer interface {
	LastHeard() time.Time
	Relists() int64
}

// RegisterInformer registers, for the informer of resource (such as
// "pods"), evictd_informer_last_heard_seconds (how long since it last heard
// from the API server: a watch bookmark comes about every minute, so much
// more means a watch stuck or an API server away) and
// evictd_informer_relists_total (relists that replaced its cache: a watch
// found stale, or a pod the API server says is gone that the cache still
// listed). now gives the time (time.Now when nil).
func RegisterInformer(reg prometheus.Registerer, resource string, inf Informer, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	labels := prometheus.Labels{"resource": resource}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "evictd_informer_last_heard_seconds",
		Help: "Seconds since the informer of resource (pods) last heard from the API server: a list, or any watch event, bookmarks included " +
			"(about one a minute on a quiet watch); -1 before it ever did.",
		ConstLabels: labels,
	}, func() float64 {
		at := inf.LastHeard()
		if at.IsZero() {
			return -1
		}
		return now().Sub(at).Seconds()
	})
	relists := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "evictd_informer_relists_total",
		Help: "Relists that replaced the cache of the informer of resource (pods): its watch silent while the API server answered, " +
			"or a pod the API server said was gone still in the cache.",
		ConstLabels: labels,
	}, func() float64 { return float64(inf.Relists()) })
	for _, c := range []prometheus.Collector{age, relists} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register informer metrics of %s: %w", resource, err)
		}
	}
	return nil
}
