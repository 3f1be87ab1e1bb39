package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// nativeOversell is the original oversell mode on real kubelets at their
// default frequencies (10 s update, 5 m report; the figure in docs/design.md
// is about them): two nodes of this machine, one opted in by the admin-only
// label. kubelet admits pods against the allocatable it reads back from the
// API server, so the inflated value is what it judges by. Then the status
// writes of both nodes are counted side by side in one window. The webhook
// for nodes/status must be registered; nothing else writes these nodes. ns
// must hold no pods (all of them are deleted before counting).
func nativeOversell(t *testing.T, c *cluster.Cluster, ns string) {
	ctx := context.Background()
	window := time.Minute
	if v := os.Getenv("KUBE_RECLAIM_OVERSELL_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			t.Fatalf("KUBE_RECLAIM_OVERSELL_WINDOW: %v", err)
		}
	}
	const plain, opted = "real-defaults", "real-oversold"
	// One after the other: the plain node's registration writes settle while
	// the second node starts and the pods below run, so its quiet time is
	// clocked from the moment it is Ready.
	var plainQuiet changeClock
	for _, name := range []string{plain, opted} {
		if _, err := c.AddRealNode(ctx, name, cluster.RealNodeSpec{}); err != nil {
			t.Fatal(err)
		}
		plainQuiet.observe(view(t, c, plain).Node)
	}

	framework.MustPatchNode(t, c, opted, map[string]any{"metadata": map[string]any{"labels": map[string]any{names.CPURatio: "1.5"}}})
	// kubelet posts nothing until its status changes or the report period
	// passes, and the webhook only inflates on a status write: one unchanged
	// status patch goes through it now.
	framework.MustPatchNode(t, c, opted, map[string]any{"status": map[string]any{
		"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}}, "status")
	// Positive control for everything below: the oversold allocatable is in
	// the stored status, 1.5 × the raw value the webhook recorded.
	var raw, oversold int64
	if _, ok := framework.Poll(time.Minute, time.Second, func() bool {
		n := view(t, c, opted).Node
		rec, err := webhook.ParseOversellRecord(n.Annotations[webhook.OversellRecordAnnotation(names)])
		if err != nil || rec.CPU == nil {
			return false
		}
		raw, oversold = rec.CPU.Raw.MilliValue(), n.Status.Allocatable.Cpu().MilliValue()
		return raw > 0 && oversold == raw*3/2
	}); !ok {
		t.Fatalf("oversell never applied on %s: raw cpu %dm, allocatable %dm, want 1.5 × raw", opted, raw, oversold)
	}
	// Both kubelets run on this machine with one configuration: what the
	// record calls raw must be what kubelet reports on the plain node.
	if got := view(t, c, plain).Node.Status.Allocatable.Cpu().MilliValue(); got != raw {
		t.Errorf("plain node allocatable cpu %dm, the opted-in node's recorded raw value %dm: not kubelet's own value", got, raw)
	}
	plainQuiet.observe(view(t, c, plain).Node)

	t.Run("kubelet runs a pod only the oversold allocatable fits, refuses one beyond it, and refuses the first on the plain node", func(t *testing.T) {
		cpu := func(milli int64) corev1.ResourceRequirements {
			return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}
		}
		// Placed with spec.nodeName: no scheduler filters them, only kubelet's
		// admission decides.
		fits := raw + (oversold-raw)/2
		// Alone it would fit even the raw allocatable; only the sum passes
		// the oversold one.
		beyond := oversold - fits + 100
		p := runPod(t, c, workloadPod(ns, "oversold-fits", opted, cpu(fits)), corev1.PodRunning, 90*time.Second)
		t.Logf("%s admitted and Running with a cpu request of %dm on raw %dm, oversold %dm", p.Name, fits, raw, oversold)
		refused := func(name, node string, milli, used, capacity int64) {
			t.Helper()
			p := runPod(t, c, workloadPod(ns, name, node, cpu(milli)), corev1.PodFailed, 60*time.Second)
			// kubelet's message names the allocatable it judged by.
			want := fmt.Sprintf("requested: %d, used: %d, capacity: %d", milli, used, capacity)
			if p.Status.Reason != "OutOfcpu" || !strings.Contains(p.Status.Message, want) {
				t.Errorf("pod %s on %s: reason %q message %q, want OutOfcpu with %q", name, node, p.Status.Reason, p.Status.Message, want)
			}
			t.Logf("%s refused on %s: %s", name, node, p.Status.Message)
		}
		refused("oversold-beyond", opted, beyond, fits, oversold)
		// Control: the first pod really needs the oversold value.
		refused("oversold-on-plain", plain, fits, 0, raw)
		// Nothing may run on either node while their writes are counted.
		framework.DeleteAllPods(t, c, ns)
	})

	t.Run("status writes per minute: the plain and the opted-in node counted side by side", func(t *testing.T) {
		// Registration writes (kubelet's, the node controller's taint removal)
		// must be over before counting: the plain node unchanged for 15 s,
		// neither node tainted. A fixed pause could still be inside them on a
		// busy machine.
		if _, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
			p, o := view(t, c, plain).Node, view(t, c, opted).Node
			quiet := plainQuiet.observe(p)
			return cluster.NodeReady(p) && cluster.NodeReady(o) && len(p.Spec.Taints) == 0 && len(o.Spec.Taints) == 0 && quiet >= 15*time.Second
		}); !ok {
			t.Logf("nodes still changing after 2 minutes; counting anyway")
		}
		wPlain, wOpted := framework.WatchNode(t, c, plain), framework.WatchNode(t, c, opted)
		time.Sleep(window)
		plainWrites, optedVersions := wPlain.Stop(t), wOpted.Stop(t)
		// Every stored version of the opted-in node kept the oversold value:
		// kubelet's writes carry the raw one, so a version without it would
		// have been a moment of admission against raw.
		for _, n := range optedVersions {
			if got := n.Status.Allocatable.Cpu().MilliValue(); got != oversold {
				t.Errorf("opted-in node version %s has allocatable cpu %dm, want %dm", n.ResourceVersion, got, oversold)
			}
		}
		nPlain, nOpted := len(plainWrites), len(optedVersions)
		perMin := func(n int) float64 { return float64(n) / window.Minutes() }
		t.Logf("nodes/status writes over one %s window: plain %d (%.2f/min), opted in %d (%.2f/min)", window, nPlain, perMin(nPlain), nOpted, perMin(nOpted))
		if nOpted <= nPlain || perMin(nOpted) < 3 {
			t.Errorf("opted-in node wrote %d times against %d for the plain node over %s: kubelet did not re-post every update period", nOpted, nPlain, window)
		}
	})
}

// changeClock tracks since when a node has been unchanged, by its
// resourceVersion: equal versions mean no write in between, however rarely
// it is looked at.
type changeClock struct {
	rv    string
	since time.Time
}

// observe records a look at the node and returns how long it has been
// unchanged (since the first look at the latest version).
func (q *changeClock) observe(n *corev1.Node) time.Duration {
	if n.ResourceVersion != q.rv {
		q.rv, q.since = n.ResourceVersion, time.Now()
	}
	return time.Since(q.since)
}
