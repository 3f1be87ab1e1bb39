package cputime

import (
	"runtime"
	"testing"
	"time"
)

// Both clocks advance while the goroutine burns CPU, and neither by the wall
// time of a sleep. The machine may be busy: the loop runs until the clock
// shows its CPU, within a generous wall-time bound.
func TestClocksCountCPUNotWallTime(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range []struct {
		name string
		read func() (time.Duration, bool)
	}{{"process", Process}, {"thread", Thread}} {
		t.Run(c.name, func(t *testing.T) {
			start, ok := c.read()
			if !ok {
				t.Skipf("no %s CPU clock on %s", c.name, runtime.GOOS)
			}
			busy := start
			for deadline := time.Now().Add(10 * time.Second); busy-start < 20*time.Millisecond; busy, _ = c.read() {
				if time.Now().After(deadline) {
					t.Fatalf("10s of busy loop advanced the clock by %v", busy-start)
				}
				spin(time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			idle, _ := c.read()
			if idle-busy > 100*time.Millisecond {
				t.Errorf("a 200ms sleep advanced the clock by %v", idle-busy)
			}
		})
	}
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
