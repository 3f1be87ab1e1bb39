// Package leaderlease tells the webhook and the extender whether the
// publisher is alive, by watching its leader-election Lease in the
// background so that nothing on a request path has to call the API server.
package leaderlease

import (
	"context"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Tracker follows one Lease. The zero value and a nil *Tracker report alive,
// so roles work without a tracked lease (for example when the publisher runs
// without leader election): the annotation's own write time still bounds
// staleness.
type Tracker struct {
	informer cache.SharedIndexInformer
	// renewDeadline is the unix-nano instant after which the leader counts as
	// dead: renewTime + 2 × leaseDuration. 0 means no lease seen (alive).
	deadline atomic.Int64
}

// New creates a tracker of namespace/name. Call Run to start it.
func New(client kubernetes.Interface, namespace, name string) *Tracker {
	lw := cache.NewListWatchFromClient(client.CoordinationV1().RESTClient(), "leases", namespace,
		fields.OneTermEqualSelector("metadata.name", name))
	t := &Tracker{informer: cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})}
	_, _ = t.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj interface{}) { t.observe(obj) },
		DeleteFunc: func(interface{}) { t.deadline.Store(0) },
	})
	return t
}

func (t *Tracker) observe(obj interface{}) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		t.deadline.Store(0)
		return
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	t.deadline.Store(l.Spec.RenewTime.Add(2 * d).UnixNano())
}

// Run runs the informer until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	if t == nil {
		return
	}
	t.informer.Run(ctx.Done())
}

// HasSynced reports whether the first list completed.
func (t *Tracker) HasSynced() bool { return t == nil || t.informer.HasSynced() }

// Alive reports whether the publisher leader renewed its lease within two lease
// durations before now. It never blocks.
func (t *Tracker) Alive(now time.Time) bool {
	if t == nil {
		return true
	}
	d := t.deadline.Load()
	return d == 0 || now.UnixNano() < d
}
