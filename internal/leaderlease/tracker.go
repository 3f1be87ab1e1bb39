// Package leaderlease tells the webhook and the extender whether the
// publisher is alive, by watching its leader-election Lease in the
// background so that nothing on a request path has to call the API server.
package leaderlease

import (
	"context"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/watchhealth"
)

// Tracker follows one Lease and judges each version it sees by Next. A Lease
// it tracks counts as dead when it does not exist, was deleted or lacks a
// renew time or duration: anyone able to delete or blank the Lease must not
// thereby keep stale room published, and a publisher that never took the
// Lease has not published anything fresh. A Lease its holder released keeps
// the deadline of the holder's last renewal.
//
// A nil *Tracker reports alive: it means the configuration tracks no Lease
// (--publisher-lease-name empty, for a publisher that runs without leader
// election), so only the annotation's own write time bounds staleness. Create
// trackers with New; a zero Tracker has no informer.
type Tracker struct {
	informer cache.SharedIndexInformer
	watch    *watchhealth.Watch
	// deadline is the unix-nano instant after which the leader counts as
	// dead: renewTime + 2 × leaseDuration. 0 means no usable Lease (dead).
	deadline atomic.Int64
}

// New creates a tracker of namespace/name. Call Run to start it.
func New(client kubernetes.Interface, namespace, name string) *Tracker {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	leases := client.CoordinationV1().Leases(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return leases.Watch(ctx, o)
		},
	}
	w := watchhealth.New("publisher lease "+namespace+"/"+name, watchhealth.DefaultStall)
	t := &Tracker{informer: cache.NewSharedIndexInformer(w.ListerWatcher(lw), &coordinationv1.Lease{}, 0, cache.Indexers{}), watch: w}
	_, _ = t.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj interface{}) { t.observe(obj) },
		DeleteFunc: func(interface{}) { t.deadline.Store(0) },
	})
	return t
}

// Deadline is the instant after which the holder of l counts as dead:
// renewTime + 2 × leaseDuration. ok is false for a Lease without a renew
// time or duration, which counts as dead.
func Deadline(l *coordinationv1.Lease) (deadline time.Time, ok bool) {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return l.Spec.RenewTime.Add(2 * time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), true
}

// Released reports whether l is a Lease its holder gave up: client-go's
// leader election blanks the holder (and sets a one-second duration) when a
// leader that stops releases it.
func Released(l *coordinationv1.Lease) bool {
	return l != nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")
}

// Next is the one rule every reader of the publisher's Lease judges by (the
// Tracker of the webhook and the extender, and kubectl reclaim through
// Read): the deadline after seeing l, given the deadline held before it
// (zero: none, dead). A Lease without a renew time or duration is dead. A
// released Lease keeps the held deadline, never extended: a publisher that
// stops (a deleted pod, every rolling update) releases it, and a standby
// takes it within a retry period. Its last writes are as fresh as its last
// renewal made them; taken from the release itself, every reader would count
// the room as zero from two seconds after the release until the takeover.
func Next(held time.Time, l *coordinationv1.Lease) time.Time {
	deadline, ok := Deadline(l)
	switch {
	case !ok:
		return time.Time{}
	case Released(l):
		return held
	default:
		return deadline
	}
}

func (t *Tracker) observe(obj interface{}) {
	l, _ := obj.(*coordinationv1.Lease)
	var held time.Time
	if d := t.deadline.Load(); d != 0 {
		held = time.Unix(0, d)
	}
	next := Next(held, l)
	if next.IsZero() {
		t.deadline.Store(0)
		return
	}
	t.deadline.Store(next.UnixNano())
}

// Run runs the informer until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	if t == nil {
		return
	}
	t.watch.Run(ctx, t.informer)
}

// Check is the liveness of the tracker's informer (watchhealth.Watch.Check):
// a tracker that no longer follows the Lease counts a live publisher as
// dead, or a dead one as alive, for as long as it goes on. A nil Tracker
// passes.
func (t *Tracker) Check() error {
	if t == nil || t.watch == nil {
		return nil
	}
	return t.watch.Check()
}

// HasSynced reports whether the first list completed.
func (t *Tracker) HasSynced() bool { return t == nil || t.informer.HasSynced() }

// Alive reports whether the publisher leader renewed its lease within two lease
// durations before now. Before the first list completes it reports dead, like
// a missing Lease; the roles wait for HasSynced before they count on it. It
// never blocks.
func (t *Tracker) Alive(now time.Time) bool {
	if t == nil {
		return true
	}
	d := t.deadline.Load()
	return d != 0 && now.UnixNano() < d
}
