// Package watchhealth tells whether an informer still follows the API
// server, for the roles' liveness checks (serving.Health.AddLiveCheck).
//
// An informer never gives up: its reflector lists and watches again after
// every failure, backing off up to a minute (30 s and as much jitter), and
// logs a refused watch at debug level only. A role whose watch cannot be re-established (an
// expired credential, a connection to an API server that went away) thus
// serves from a cache that no longer changes, and nothing says so. A Watch
// wraps the informer's ListerWatcher to see every list and watch call end,
// and fails its check once they have done nothing but fail for its stall
// time, or once the informer stopped running.
package watchhealth

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// DefaultStall is how long a role's informers may fail to list and watch
// before its /healthz fails: far beyond the reflector's longest backoff
// (a minute) and an API server's restart, so that only a watch that a restart
// may re-establish (and a restart loop that says something is wrong) ends
// in one.
const DefaultStall = 5 * time.Minute

// Watch follows the list and watch calls of one informer or reflector.
// Create it with New; wrap the informer's ListerWatcher with ListerWatcher
// and run the informer with Run.
type Watch struct {
	name  string
	stall time.Duration
	now   func() time.Time
	// failingSince is the unix-nano instant the first call failed since
	// the last one that succeeded; 0 while the last call that ended
	// succeeded, or none ended yet.
	failingSince atomic.Int64
	lastErr      atomic.Pointer[string]
	stopped      atomic.Bool
}

// New returns a Watch of the informer called name (its check's messages
// say it) that fails once its calls have failed for stall.
func New(name string, stall time.Duration) *Watch {
	return &Watch{name: name, stall: stall, now: time.Now}
}

// ListerWatcher wraps lw so that w sees how every call ends. A call that
// ends because its context did (the informer stopping) says nothing.
func (w *Watch) ListerWatcher(lw cache.ListerWatcherWithContext) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := lw.ListWithContext(ctx, o)
			w.observe(ctx, err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := lw.WatchWithContext(ctx, o)
			w.observe(ctx, err)
			return wi, err
		},
	}
}

func (w *Watch) observe(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		w.failingSince.Store(0)
		return
	}
	msg := err.Error()
	w.lastErr.Store(&msg)
	w.failingSince.CompareAndSwap(0, w.now().UnixNano())
}

// Runner is an informer or a reflector.
type Runner interface{ RunWithContext(context.Context) }

// Run runs r until ctx ends; from then on the check fails. It ends only
// with ctx, so a check failing for that reason is seen only while the
// process shuts down, or when a change lets an informer end early.
func (w *Watch) Run(ctx context.Context, r Runner) {
	defer w.stopped.Store(true)
	r.RunWithContext(ctx)
}

// Check fails when the informer stopped, or when its list and watch calls
// have failed for the stall time without one succeeding. It never blocks.
func (w *Watch) Check() error {
	if w.stopped.Load() {
		return fmt.Errorf("%s: informer stopped", w.name)
	}
	since := w.failingSince.Load()
	if since == 0 {
		return nil
	}
	if d := w.now().Sub(time.Unix(0, since)); d >= w.stall {
		var last string
		if p := w.lastErr.Load(); p != nil {
			last = *p
		}
		return fmt.Errorf("%s: no list or watch succeeded for %s (limit %s); last error: %s", w.name, d.Round(time.Second), w.stall, last)
	}
	return nil
}

// Checks joins the checks of ws into one, for Health.AddLiveCheck; nil
// entries (informers not run in this configuration) pass.
func Checks(ws ...*Watch) func() error {
	return func() error {
		var errs []error
		for _, w := range ws {
			if w != nil {
				errs = append(errs, w.Check())
			}
		}
		return errors.Join(errs...)
	}
}
