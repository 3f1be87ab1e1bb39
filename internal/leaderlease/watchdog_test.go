package leaderlease

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// stubLock answers every write with err.
type stubLock struct {
	resourcelock.Interface
	err error
}

func (l *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }
func (l *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }

// Only a write that succeeded is a renewal; a watchdog with no elector
// (leader election off) passes.
func TestWatchdogTimesOnlyTheWritesThatSucceeded(t *testing.T) {
	w := NewWatchdog("kube-reclaim/kube-reclaim-publisher", time.Second)
	if err := w.Check(); err != nil {
		t.Errorf("no elector: %v", err)
	}
	stub := &stubLock{}
	lock := w.Lock(stub)
	for _, tc := range []struct {
		name    string
		err     error
		renewed bool
	}{
		{"update refused", errors.New("conflict"), false},
		{"update succeeded", nil, true},
		{"update refused again", errors.New("timeout"), false},
	} {
		before := w.renewed.Load()
		stub.err = tc.err
		time.Sleep(time.Millisecond)
		if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); !errors.Is(err, tc.err) {
			t.Errorf("%s: Update = %v, want the lock's own %v", tc.name, err, tc.err)
		}
		if got := w.renewed.Load() != before; got != tc.renewed {
			t.Errorf("%s: renewal recorded %v, want %v", tc.name, got, tc.renewed)
		}
	}
	stub.err = nil
	before := w.renewed.Load()
	time.Sleep(time.Millisecond)
	if err := lock.Create(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil || w.renewed.Load() == before {
		t.Errorf("Create = %v, renewal recorded %v: the first write (taking the Lease) counts too", err, w.renewed.Load() != before)
	}
}
