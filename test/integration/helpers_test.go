// Package integration holds the integration tests of kube-reclaim. Every test
// here runs against the real local control plane of test/cluster: no fakes.
package integration

import (
	"os"
	"testing"
)

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func statDir(dir string) (os.FileInfo, error) { return os.Stat(dir) }
