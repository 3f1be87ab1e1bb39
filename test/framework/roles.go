package framework

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// KubeReclaim builds cmd/kube-reclaim once per test binary and returns its
// path: the roles run as real processes, so that a test can kill one the way
// a node failure would. Call RemoveBinary from TestMain.
func KubeReclaim(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "kube-reclaim-bin-")
		if binary.err != nil {
			return
		}
		// Linking takes minutes on a busy 2-core machine.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		binary.path, binary.err = stack.BuildBinary(ctx, binary.dir)
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// RemoveBinary removes what KubeReclaim built.
func RemoveBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// Role is a kube-reclaim process started by a test.
type Role struct {
	c          *cluster.Cluster
	Name       string
	HealthPort int
}

// StartRole runs `kube-reclaim <subcommand> args...` under c as process
// name, with its health server on a free port and debug logs, and waits for
// /readyz.
func StartRole(t testing.TB, c *cluster.Cluster, name, subcommand string, args ...string) *Role {
	t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{subcommand, "--kubeconfig=" + c.Kubeconfig(), fmt.Sprintf("--health-address=127.0.0.1:%d", port), "--log-level=debug"}, args...)
	if err := c.StartProcess(name, KubeReclaim(t), all...); err != nil {
		t.Fatal(err)
	}
	r := &Role{c: c, Name: name, HealthPort: port}
	r.WaitReady(t, 60*time.Second)
	return r
}

// AttachRole is a Role for a process the test started itself with
// c.StartProcess, for example under a kubeconfig of its own.
func AttachRole(c *cluster.Cluster, name string, healthPort int) *Role {
	return &Role{c: c, Name: name, HealthPort: healthPort}
}

// WaitReady waits for the role's /readyz and fails the test when it exits
// or times out.
func (r *Role) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := stack.WaitReadyz(context.Background(), r.c, r.Name, r.HealthPort, timeout); err != nil {
		t.Fatal(err)
	}
}

// Metric reads one of the role's metrics (see SumSamples).
func (r *Role) Metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return Scrape(t, r.HealthPort, name, labels...)
}
