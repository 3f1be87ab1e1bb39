package serving

import (
	"context"
	"time"
)

// InFlight bounds the requests a route serves at once. A caller that finds
// every slot taken waits a short while and is then turned away (the handler
// answers 429), so a flood of callers costs the server a bounded amount of
// work and memory instead of a queue that grows with the flood.
type InFlight struct {
	slots chan struct{}
}

// NewInFlight returns n slots (at least one).
func NewInFlight(n int) *InFlight {
	return &InFlight{slots: make(chan struct{}, max(n, 1))}
}

// Acquire takes a slot, waiting at most wait for one to free and never past
// ctx; it reports whether it got one. Every true must be followed by one
// Release.
func (f *InFlight) Acquire(ctx context.Context, wait time.Duration) bool {
	select {
	case f.slots <- struct{}{}:
		return true
	default:
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case f.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// Release frees a slot taken by Acquire.
func (f *InFlight) Release() { <-f.slots }

// Cap is the number of slots.
func (f *InFlight) Cap() int { return cap(f.slots) }

// InUse is the number of slots taken now.
func (f *InFlight) InUse() int { return len(f.slots) }
