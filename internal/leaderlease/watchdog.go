package leaderlease

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Watchdog is the liveness of a leader election, as kube-controller-manager
// has one: it fails while this process leads but has not renewed its Lease
// for two lease durations. The elector gives up leading once a renewal
// fails for its renew deadline, so a leader that goes that long is one
// whose renewals hang (an API call that never answers): it goes on acting
// as the leader while every reader counts it dead (Deadline) and another
// replica may take the Lease, and only a restart ends it.
//
// client-go has this check (HealthzAdaptor, LeaderElectionConfig.WatchDog),
// but at the version pinned here it reads the time of the last renewal
// without the lock its writer holds (kubernetes/kubernetes#136068, fixed
// after it), which the race detector reports. The Watchdog times renewals
// from the lock's side instead, and asks the elector only whether it
// leads, which client-go reads under its lock.
type Watchdog struct {
	name          string
	leaseDuration time.Duration
	// renewed is the unix-nano instant of the last Lease write that
	// succeeded.
	renewed atomic.Int64
	elector atomic.Pointer[leaderelection.LeaderElector]
}

// NewWatchdog returns the watchdog of the Lease called name, renewed every
// leaseDuration at most. Wrap the elector's lock with Lock and give the
// elector to Watch.
func NewWatchdog(name string, leaseDuration time.Duration) *Watchdog {
	return &Watchdog{name: name, leaseDuration: leaseDuration}
}

// Lock wraps the elector's lock so that w sees every Lease write succeed.
func (w *Watchdog) Lock(l resourcelock.Interface) resourcelock.Interface { return &timedLock{l, w} }

// Watch ties w to the elector built on its Lock. Time counts from now
// until the first write: an elector that finds the Lease already held under
// its identity leads before it has written.
func (w *Watchdog) Watch(le *leaderelection.LeaderElector) {
	w.renewed.Store(time.Now().UnixNano())
	w.elector.Store(le)
}

// Check fails while the elector leads and its last Lease write that
// succeeded is more than two lease durations old. It never blocks.
func (w *Watchdog) Check() error {
	le := w.elector.Load()
	if le == nil || !le.IsLeader() {
		return nil
	}
	if d := time.Since(time.Unix(0, w.renewed.Load())); d > 2*w.leaseDuration {
		return fmt.Errorf("leading, and the Lease %s not renewed for %s (over two lease durations: every reader counts this leader dead)", w.name, d.Round(time.Second))
	}
	return nil
}

// timedLock is a resourcelock.Interface that records when a write succeeds.
type timedLock struct {
	resourcelock.Interface
	w *Watchdog
}

func (l *timedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.wrote(l.Interface.Create(ctx, r))
}

func (l *timedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.wrote(l.Interface.Update(ctx, r))
}

func (l *timedLock) wrote(err error) error {
	if err == nil {
		l.w.renewed.Store(time.Now().UnixNano())
	}
	return err
}
