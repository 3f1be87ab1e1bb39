package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

const tempPrefix = "kube-reclaim-cluster-"

var (
	tempMu   sync.Mutex
	tempDirs = map[string]struct{}{}
)

// makeTempDir creates the cluster's directory, recording the owner pid in it,
// and first removes directories whose owner died without cleaning up (a test
// binary killed with SIGKILL).
func makeTempDir() (string, error) {
	sweepOrphanDirs()
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", err
	}
	tempMu.Lock()
	tempDirs[dir] = struct{}{}
	tempMu.Unlock()
	return dir, nil
}

func forgetTempDir(dir string) {
	tempMu.Lock()
	delete(tempDirs, dir)
	tempMu.Unlock()
}

func removeTempDirs() {
	tempMu.Lock()
	defer tempMu.Unlock()
	for d := range tempDirs {
		cleanupClusterDir(d)
		_ = os.RemoveAll(d)
		delete(tempDirs, d)
	}
}

func sweepOrphanDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range matches {
		data, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid == os.Getpid() || PIDAlive(pid) {
			continue
		}
		cleanupClusterDir(d)
		if os.RemoveAll(d) == nil {
			fmt.Fprintf(os.Stderr, "cluster: removed %s left by dead process %d\n", d, pid)
		}
	}
}
