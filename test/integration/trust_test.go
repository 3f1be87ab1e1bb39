package integration

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestWebhookCountsAMissingPublisherLeaseAsDown: a webhook that tracks the
// publisher's Lease injects zero room while the Lease does not exist, values
// once a renewed Lease appears (the positive control: the same node, the same
// annotation, the same heartbeats), and zero again once the Lease is deleted.
func TestWebhookCountsAMissingPublisherLeaseAsDown(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true})
	nodes := framework.AddReadyNodes(t, c, 1, cluster.NodeSpec{NamePrefix: "trust", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)
	const ns, lease = "trust-lease", "kube-reclaim-publisher"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	registerWebhook(t, c, "--stale-after=10m", "--publisher-lease-namespace="+ns, "--publisher-lease-name="+lease)
	heartbeat := 30 * time.Second // 4s + jitter, with room for a busy machine
	node := nodes[0]
	// A fresh annotation, rewritten before each phase so that only the Lease
	// decides.
	annotate := func() {
		framework.SetAnnotation(t, c, node, reclaimable.Annotation{CPUMilli: 3000, MemoryBytes: 2 << 30, Policy: "usage", WriteTime: time.Now()})
	}
	reclaimedCPU := func(n *corev1.Node) (int64, bool) {
		q, ok := n.Status.Allocatable[names.CPU]
		return q.Value(), ok
	}
	// The apiserver loads a new webhook configuration through an informer:
	// wait until a heartbeat was reviewed (the reclaimed resources appear)
	// before judging any.
	annotate()
	if _, ok := framework.Poll(4*heartbeat, time.Second, func() bool {
		_, ok := reclaimedCPU(waitHeartbeat(t, c, node, heartbeat))
		return ok
	}); !ok {
		t.Fatal("the apiserver never called the webhook on a heartbeat")
	}

	// zeroOnEveryHeartbeat samples beats heartbeats and wants zero on each.
	zeroOnEveryHeartbeat := func(phase string, beats int) {
		t.Helper()
		annotate()
		for i := range beats {
			n := waitHeartbeat(t, c, node, heartbeat)
			if cpu, ok := reclaimedCPU(n); !ok || cpu != 0 {
				t.Fatalf("%s: heartbeat %d: reclaimed cpu %d (present %v), want 0", phase, i+1, cpu, ok)
			}
			assertInjected(t, n, 0, 0)
		}
		t.Logf("%s: zero on %d heartbeats in a row", phase, beats)
	}
	zeroOnEveryHeartbeat("no Lease", 3)

	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("publisher-0"), LeaseDurationSeconds: ptr.To[int32](300),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	if _, err := c.Client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	annotate()
	// The webhook sees the Lease through its watch, shortly after.
	if _, ok := framework.Poll(4*heartbeat, time.Second, func() bool {
		cpu, _ := reclaimedCPU(waitHeartbeat(t, c, node, heartbeat))
		return cpu == 3000
	}); !ok {
		t.Fatal("positive control: a renewed Lease never let the annotation's values through")
	}
	assertInjected(t, waitHeartbeat(t, c, node, heartbeat), 3000, 2<<30)

	if err := c.Client.CoordinationV1().Leases(ns).Delete(ctx, lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion reaches the webhook through its watch; the first heartbeat
	// after it may still be reviewed before.
	if _, ok := framework.Poll(4*heartbeat, time.Second, func() bool {
		annotate()
		cpu, _ := reclaimedCPU(waitHeartbeat(t, c, node, heartbeat))
		return cpu == 0
	}); !ok {
		t.Fatal("a deleted Lease still let the annotation's values through")
	}
	zeroOnEveryHeartbeat("Lease deleted", 3)
}
