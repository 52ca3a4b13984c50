package kubeclient

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Lister lists and watches one resource, as Client's typed clients do.
type Lister[T, L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// NewInformer returns an informer of what l lists, with tweak (if not nil)
// applied to every list and watch (a field selector naming the node),
// indexed by namespace, as client-go's generated informers build it. Its
// reflector restarts a failed list or watch with client-go's jittered
// exponential backoff (800ms doubling to 30s, jitter 1.0). heard, if not
// nil, is called on every answered list and every event a watch brings,
// bookmarks included (which the API server sends about once a minute on a
// quiet watch, and which reach no event handler): that the informer still
// hears from the API server.
func NewInformer[T, L runtime.Object](l Lister[T, L], obj T, resync time.Duration, tweak func(*metav1.ListOptions), heard func()) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	if heard == nil {
		heard = func() {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			list, err := l.List(ctx, o)
			if err == nil {
				heard()
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			w, err := l.Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return newHeardWatch(w, heard), nil
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, l), obj,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// heardWatch passes on the events of a watch, calling heard for each.
type heardWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newHeardWatch(inner watch.Interface, heard func()) *heardWatch {
	w := &heardWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range inner.ResultChan() {
			heard()
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *heardWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the watch; the events not yet taken are dropped.
func (w *heardWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.inner.Stop()
}
