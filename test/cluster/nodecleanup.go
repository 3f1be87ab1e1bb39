package cluster

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeDirPrefix names a real node's directory inside the cluster's.
const nodeDirPrefix = "node-"

// nodeIdentity derives a real node's short id, cgroup root and bridge name
// from its directory, so that a later sweep can find what a killed test
// binary left behind from the directory alone.
func nodeIdentity(nodeDir string) (id, cgroupRoot, bridge string) {
	sum := sha256.Sum256([]byte(nodeDir))
	id = hex.EncodeToString(sum[:])[:8]
	// Bridge names are limited to 15 bytes.
	return id, "/kube-reclaim-" + id, "krbr" + id
}

// cgroupHierarchies are the directories under which a cgroup path exists:
// every v1 hierarchy, or the single v2 one.
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil && e.Name() != "unified" {
			out = append(out, p)
		}
	}
	return out
}

// makeCgroupRoot creates the node's cgroup root in every hierarchy: kubelet
// refuses a cgroupRoot that does not exist. A new cpuset cgroup starts with
// no CPUs or memory nodes, so it copies its parent's.
func (n *RealNode) makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, n.CgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("%s/%s: %w", d, f, err)
				}
			}
		}
	}
	return nil
}

// cleanupClusterDir removes what the real nodes under a cluster directory
// left outside it, before the directory itself is removed.
func cleanupClusterDir(dir string) {
	nodes, _ := filepath.Glob(filepath.Join(dir, nodeDirPrefix+"*"))
	for _, d := range nodes {
		id, cgroupRoot, bridge := nodeIdentity(d)
		cleanupNodeLeftovers(d, id, cgroupRoot, bridge)
	}
	unmountBelow(dir, true)
}

// cleanupNodeLeftovers kills containerd shims and container processes,
// removes the node's cgroups, unmounts everything below its directory and
// deletes its bridge and its link to the host (a node in its own network
// namespace). kubelet and containerd are stopped by then; the shims do not
// die with containerd, and containers do not die with the shims.
func cleanupNodeLeftovers(nodeDir, id, cgroupRoot, bridge string) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		killed := killProcessesMentioning(nodeDir) + killCgroupProcesses(cgroupRoot)
		if killed == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for time.Now().Before(deadline) && !removeCgroups(cgroupRoot) {
		time.Sleep(200 * time.Millisecond)
	}
	unmountBelow(nodeDir, true)
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridge)); err == nil {
		_ = exec.Command("ip", "link", "delete", bridge).Run() //nolint:noctx // cleanup must run to the end
	}
	teardownNetwork(nodeDir, id)
}

// killProcessesMentioning SIGKILLs every process whose command line contains
// dir (containerd shims carry their containerd's socket path) and returns
// how many it found.
func killProcessesMentioning(dir string) int {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir+"/")) || !PIDAlive(pid) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		n++
	}
	return n
}

// killCgroupProcesses SIGKILLs every process in any cgroup below root.
func killCgroupProcesses(root string) int {
	n := 0
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				// A cgroup removed while walking has nothing left to kill.
				return filepath.SkipDir
			}
			if !d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && PIDAlive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					n++
				}
			}
			return nil
		})
	}
	return n
}

// removeCgroups removes root and every cgroup below it, deepest first, and
// reports whether none is left.
func removeCgroups(root string) bool {
	ok := true
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !os.IsNotExist(err) {
				ok = false
			}
		}
	}
	return ok
}

// MountsBelow lists the mount points of this mount namespace at or below dir.
func MountsBelow(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountBelow detaches every mount below dir, deepest first; withDir also
// the mount at dir itself.
func unmountBelow(dir string, withDir bool) {
	for range 3 {
		mounts := MountsBelow(dir)
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		left := 0
		for _, m := range mounts {
			if m == dir && !withDir {
				continue
			}
			left++
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
		if left == 0 {
			return
		}
	}
}
