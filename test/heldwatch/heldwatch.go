// Package heldwatch serves a fake clientset's watches whose Stop waits for
// the test, to show that a role's Run returns only once its informers have
// stopped: an informer stops its watch on its way out, so holding Stop holds
// the informer.
package heldwatch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// Watches counts the watches it served and holds their Stop until Release.
type Watches struct {
	opened, stopping atomic.Int32
	release          chan struct{}
	once             sync.Once
}

func New() *Watches { return &Watches{release: make(chan struct{})} }

// Reactor serves watches from tracker, wrapped; prepend it for a resource.
func (w *Watches) Reactor(tracker clienttesting.ObjectTracker) clienttesting.WatchReactionFunc {
	return func(a clienttesting.Action) (bool, watch.Interface, error) {
		inner, err := tracker.Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		w.opened.Add(1)
		return true, &held{Interface: inner, w: w}, nil
	}
}

// Release lets every held Stop go on.
func (w *Watches) Release() { w.once.Do(func() { close(w.release) }) }

// CheckRunWaits ends a Run whose result done will carry: it waits until a
// watch is open, cancels, waits until the informer stops the watch, checks
// throughout 300 ms that Run does not return while the watch is held, then
// releases it and checks that Run returns nil.
func (w *Watches) CheckRunWaits(t *testing.T, cancel func(), done <-chan error) {
	t.Helper()
	defer w.Release()
	waitFor(t, "a watch to open", func() bool { return w.opened.Load() > 0 })
	cancel()
	waitFor(t, "the informer to stop its watch", func() bool { return w.stopping.Load() > 0 })
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) while an informer was still stopping", err)
		default:
		}
	}
	w.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v after a shutdown, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once its informers stopped")
	}
}

type held struct {
	watch.Interface
	w *Watches
}

func (h *held) Stop() {
	h.w.stopping.Add(1)
	<-h.w.release
	h.Interface.Stop()
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
