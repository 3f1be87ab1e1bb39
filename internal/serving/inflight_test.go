package serving_test

import (
	"context"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
)

func TestInFlightTurnsAwayCallersBeyondItsSlots(t *testing.T) {
	for _, tt := range []struct {
		name string
		// held: slots taken before the call; release: one is freed while
		// the call waits; cancel: the call's context ends while it waits.
		held             int
		release, cancel  bool
		wait             time.Duration
		want             bool
		wantWaitAtLeast  time.Duration
		wantReturnBefore time.Duration
	}{
		{name: "a free slot is taken at once", held: 1, wait: time.Hour, want: true, wantReturnBefore: time.Second},
		{name: "no free slot: turned away after the wait", held: 2, wait: 50 * time.Millisecond, wantWaitAtLeast: 50 * time.Millisecond, wantReturnBefore: 10 * time.Second},
		{name: "no free slot and no wait: turned away at once", held: 2, wantReturnBefore: time.Second},
		{name: "a slot freed during the wait is taken", held: 2, release: true, wait: time.Hour, want: true, wantReturnBefore: 10 * time.Second},
		{name: "the caller's context ending ends the wait", held: 2, cancel: true, wait: time.Hour, wantReturnBefore: 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := serving.NewInFlight(2)
			for range tt.held {
				if !f.Acquire(context.Background(), 0) {
					t.Fatal("a free slot was not taken")
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.release || tt.cancel {
				go func() {
					time.Sleep(20 * time.Millisecond)
					if tt.release {
						f.Release()
					}
					if tt.cancel {
						cancel()
					}
				}()
			}
			start := time.Now()
			got := f.Acquire(ctx, tt.wait)
			took := time.Since(start)
			if got != tt.want {
				t.Errorf("Acquire = %v, want %v", got, tt.want)
			}
			if took < tt.wantWaitAtLeast || took > tt.wantReturnBefore {
				t.Errorf("Acquire returned after %s, want between %s and %s", took, tt.wantWaitAtLeast, tt.wantReturnBefore)
			}
			if f.InUse() > f.Cap() || f.Cap() != 2 {
				t.Errorf("%d of %d slots in use", f.InUse(), f.Cap())
			}
		})
	}
}
