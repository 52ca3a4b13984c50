package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// finisher is the emulated kubelets' eyes on their pods: one informer of
// the harness (as the admin, whose reads the audit policy leaves out) in
// place of a pod watch per kubelet. A pod that gets a deletionTimestamp is
// finished by its node's kubelet.
type finisher struct {
	f       *Fleet
	ctx     context.Context
	factory informers.SharedInformerFactory
	wg      sync.WaitGroup

	mu       sync.Mutex
	handled  map[types.UID]bool
	finished []Finished
}

// Finished is a pod an emulated kubelet saw terminating and deleted.
type Finished struct {
	Node, Namespace, Name string
	// Terminating is when the kubelet saw the deletionTimestamp, Deleted
	// when its delete was accepted.
	Terminating, Deleted time.Time
	Err                  error
}

func startFinisher(ctx context.Context, f *Fleet) (*finisher, error) {
	fin := &finisher{f: f, ctx: ctx, handled: map[types.UID]bool{}}
	fin.factory = informers.NewSharedInformerFactoryWithOptions(f.admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "fleet.evictd.io/node"
	}))
	inf := fin.factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    fin.onPod,
		UpdateFunc: func(_, cur any) { fin.onPod(cur) },
	}); err != nil {
		return nil, err
	}
	fin.factory.Start(ctx.Done())
	for typ, ok := range fin.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v never synced", typ)
		}
	}
	return fin, nil
}

func (fin *finisher) onPod(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.DeletionTimestamp == nil {
		return
	}
	n := fin.f.Node(p.Spec.NodeName)
	if n == nil || n.kubelet == nil {
		return
	}
	fin.mu.Lock()
	if fin.handled[p.UID] {
		fin.mu.Unlock()
		return
	}
	fin.handled[p.UID] = true
	fin.mu.Unlock()
	seen := time.Now()
	fin.f.evicted(n, p)
	fin.wg.Go(func() {
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if err = n.kubelet.finishPod(fin.ctx, n, p); err == nil || fin.ctx.Err() != nil {
				break
			}
			select {
			case <-fin.ctx.Done():
			case <-time.After(time.Second):
			}
		}
		fin.mu.Lock()
		defer fin.mu.Unlock()
		fin.finished = append(fin.finished, Finished{Node: n.Name, Namespace: p.Namespace, Name: p.Name, Terminating: seen, Deleted: time.Now(), Err: err})
	})
}

// Finished returns the pods finished so far.
func (f *Fleet) Finished() []Finished {
	if f.finisher == nil {
		return nil
	}
	f.finisher.mu.Lock()
	defer f.finisher.mu.Unlock()
	return append([]Finished(nil), f.finisher.finished...)
}

func (fin *finisher) stop() {
	fin.factory.Shutdown()
	fin.wg.Wait()
}
