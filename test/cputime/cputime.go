// Package cputime reads the CPU time a benchmark spent, for the benchmarks
// and the load command (hack/bench): on a busy machine wall time also counts
// what other processes take, and CPU time does not.
package cputime

import "time"

// Process returns the CPU time (user + system) the process used so far,
// garbage collection and every goroutine included; false where the platform
// cannot tell.
func Process() (time.Duration, bool) { return process() }

// Thread returns the CPU time the calling OS thread used so far; with
// runtime.LockOSThread that is the calling goroutine's. False where the
// platform cannot tell.
func Thread() (time.Duration, bool) { return thread() }
