package framework

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
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
	port, serving, err := stack.ServingFlags(c)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]string{subcommand, "--kubeconfig=" + c.Kubeconfig()}, serving...), "--log-level=debug")
	all = append(all, args...)
	if err := c.StartProcess(name, KubeReclaim(t), all...); err != nil {
		t.Fatal(err)
	}
	r := &Role{c: c, Name: name, HealthPort: port}
	r.WaitReady(t, 60*time.Second)
	return r
}

// AttachRole is a Role for a process the test started itself with
// c.StartProcess, for example under a kubeconfig of its own, and the health
// port and flags of stack.ServingFlags.
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

// Metric reads one of the role's metrics (see SumSamples) over HTTPS with the
// cluster's admin token.
func (r *Role) Metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return Scrape(t, r.HealthPort, name, labels...)
}

// RenewPublisherLease creates (or renews) the publisher's leader Lease at
// its default namespace and name, renewed now for an hour, as a leading
// publisher would keep it: roles and kubectl reclaim count a missing Lease
// as a dead publisher, so a test that writes the annotation itself
// instead of running a publisher needs it.
func RenewPublisherLease(t testing.TB, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	ns, name := leaderlease.DefaultNamespace, leaderlease.DefaultName
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("test"), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	_, err = c.Client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *coordinationv1.Lease
		if old, err = c.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			old.Spec = l.Spec
			_, err = c.Client.CoordinationV1().Leases(ns).Update(ctx, old, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
