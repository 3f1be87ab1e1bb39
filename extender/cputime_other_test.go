//go:build !linux

package extender

func threadCPU() (int64, bool) { return 0, false }
