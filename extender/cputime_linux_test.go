package extender

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time consumed by the calling OS thread; with
// runtime.LockOSThread that is the calling goroutine's CPU time, which does
// not count the time other processes on a busy machine take from it.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
