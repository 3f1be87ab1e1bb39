package framework

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// Names are the resource and annotation names of the default domain, which
// every suite runs with.
var Names = reclaimable.MustNames(reclaimable.DefaultDomain)

// NodeView is what a test reads from one node: the published annotation,
// the reclaimed values in status, readiness and the last heartbeat.
type NodeView struct {
	Node *corev1.Node
	// Ann is the parsed annotation, nil when absent or invalid; Raw is its
	// value as stored.
	Ann *reclaimable.Annotation
	Raw string
	// Fresh is the verdict a webhook or extender with the given
	// --stale-after reaches at the time of the view (lease not considered).
	Fresh reclaimable.Freshness
	// Capacity and Allocatable are the reclaimed values in status (0 when
	// absent); HasStatus says both resources are in both lists.
	Capacity, Allocatable reclaimable.Resources
	HasStatus             bool
	Ready                 bool
	Heartbeat             time.Time
	// AllocCPU and AllocMem are the node's native allocatable cpu
	// (millicores) and memory (bytes).
	AllocCPU, AllocMem int64
}

// Published is what the annotation offers right now (zero unless fresh).
func (v NodeView) Published() reclaimable.Resources { return v.Fresh.Room }

// StatusMatchesAnnotation reports whether capacity and allocatable both
// carry the status value the annotation stands for: per resource the room
// floored at what it says reclaimed pods held (the room alone when nothing
// is held).
func (v NodeView) StatusMatchesAnnotation() bool {
	if v.Ann == nil || !v.HasStatus {
		return false
	}
	want := v.Ann.Room().Max(v.Ann.HeldOrZero())
	return v.Capacity == want && v.Allocatable == want
}

// ViewOf reads n as it stands at now, judging the annotation with
// staleAfter.
func ViewOf(n *corev1.Node, now time.Time, staleAfter time.Duration) NodeView {
	v := NodeView{Node: n, Ready: cluster.NodeReady(n), Heartbeat: ReadyHeartbeat(n),
		AllocCPU: n.Status.Allocatable.Cpu().MilliValue(), AllocMem: n.Status.Allocatable.Memory().Value()}
	raw, present := n.Annotations[Names.Annotation]
	v.Raw = raw
	if a, err := reclaimable.Parse(raw); err == nil {
		v.Ann = &a
	}
	v.Fresh = reclaimable.Judge(raw, present, now, staleAfter, true)
	get := func(l corev1.ResourceList) (reclaimable.Resources, bool) {
		cq, okc := l[Names.CPU]
		mq, okm := l[Names.Memory]
		return reclaimable.Resources{CPUMilli: cq.Value(), MemoryBytes: mq.Value()}, okc && okm
	}
	var okc, oka bool
	v.Capacity, okc = get(n.Status.Capacity)
	v.Allocatable, oka = get(n.Status.Allocatable)
	v.HasStatus = okc && oka
	return v
}

// Views reads the named nodes (every node when only is empty).
func Views(ctx context.Context, c *cluster.Cluster, only []string, staleAfter time.Duration) (map[string]NodeView, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	now := time.Now()
	out := map[string]NodeView{}
	for i := range list.Items {
		n := &list.Items[i]
		if len(want) == 0 || want[n.Name] {
			out[n.Name] = ViewOf(n, now, staleAfter)
		}
	}
	return out, nil
}

// View reads one node, failing the test on an error.
func View(t testing.TB, c *cluster.Cluster, node string, staleAfter time.Duration) NodeView {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ViewOf(n, time.Now(), staleAfter)
}

// ReadyHeartbeat is the last heartbeat time of the node's Ready condition.
func ReadyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// PatchNode merge-patches a node (or its status) and returns the stored
// result.
func PatchNode(ctx context.Context, c *cluster.Cluster, node string, patch map[string]any, subresources ...string) (*corev1.Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}, subresources...)
}

// MustPatchNode is PatchNode that fails the test on an error.
func MustPatchNode(t testing.TB, c *cluster.Cluster, node string, patch map[string]any, subresources ...string) *corev1.Node {
	t.Helper()
	n, err := PatchNode(context.Background(), c, node, patch, subresources...)
	if err != nil {
		t.Fatalf("patching node %s: %v", node, err)
	}
	return n
}

// SetAnnotation writes the reclaimable annotation the way the publisher
// does: a metadata patch, which the webhook does not intercept.
func SetAnnotation(t testing.TB, c *cluster.Cluster, node string, a reclaimable.Annotation) {
	t.Helper()
	v, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	MustPatchNode(t, c, node, map[string]any{"metadata": map[string]any{"annotations": map[string]any{Names.Annotation: v}}})
}

// ClearReclaimedStatus removes the reclaimed resources from the node's
// capacity and allocatable, as a kubelet re-registering the node would.
func ClearReclaimedStatus(t testing.TB, c *cluster.Cluster, node string) {
	t.Helper()
	gone := map[string]any{string(Names.CPU): nil, string(Names.Memory): nil}
	MustPatchNode(t, c, node, map[string]any{"status": map[string]any{"capacity": gone, "allocatable": gone}}, "status")
}

// SetReclaimedStatus sets the reclaimed resources in the node's capacity and
// allocatable, as the node webhook does on each kubelet write.
func SetReclaimedStatus(t testing.TB, c *cluster.Cluster, node string, cpuMilli, memBytes int64) {
	t.Helper()
	v := map[string]any{string(Names.CPU): strconv.FormatInt(cpuMilli, 10), string(Names.Memory): strconv.FormatInt(memBytes, 10)}
	MustPatchNode(t, c, node, map[string]any{"status": map[string]any{"capacity": v, "allocatable": v}}, "status")
}

// AddReadyNodes adds n kwok nodes made from spec and waits until they are
// Ready.
func AddReadyNodes(t testing.TB, c *cluster.Cluster, n int, spec cluster.NodeSpec, timeout time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.AddNodes(ctx, n, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx, nodes, timeout); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// WaitHeartbeat waits for a Ready heartbeat after the given time and returns
// the node as stored with it. Heartbeat times have second precision, so
// after is truncated to the second: a heartbeat within its second does not
// count.
func WaitHeartbeat(t testing.TB, c *cluster.Cluster, node string, after time.Time, timeout time.Duration) *corev1.Node {
	t.Helper()
	after = after.Truncate(time.Second)
	var got *corev1.Node
	if _, ok := Poll(timeout, 250*time.Millisecond, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		got = n
		return ReadyHeartbeat(n).After(after)
	}); !ok {
		t.Fatalf("node %s: no heartbeat after %s within %s", node, after.Format(time.RFC3339), timeout)
	}
	return got
}

// NodeWatch records every version of one node the apiserver stores from
// when it starts: reads now and then would miss the versions in between.
type NodeWatch struct {
	c    *cluster.Cluster
	name string
	from string // the resourceVersion the watch starts after
	w    watch.Interface
	mu   sync.Mutex
	seen []*corev1.Node
	done chan struct{}
}

// WatchNode starts recording the versions of a node after the one stored
// now.
func WatchNode(t testing.TB, c *cluster.Cluster, name string) *NodeWatch {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: n.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	nw := &NodeWatch{c: c, name: name, from: n.ResourceVersion, w: w, done: make(chan struct{})}
	go func() {
		defer close(nw.done)
		for ev := range w.ResultChan() {
			if node, ok := ev.Object.(*corev1.Node); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				nw.mu.Lock()
				nw.seen = append(nw.seen, node)
				nw.mu.Unlock()
			}
		}
	}()
	return nw
}

// Stop ends the watch once it has delivered the version stored now, and
// returns the versions it recorded, each stored change once. A fixed pause
// would be too short on a busy machine: a test that has just read a version
// through a GET could then miss it here.
func (nw *NodeWatch) Stop(t testing.TB) []*corev1.Node {
	t.Helper()
	n, err := nw.c.Client.CoreV1().Nodes().Get(context.Background(), nw.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The watch started from the version stored at WatchNode: when that is
	// still the stored one there is nothing to wait for.
	if _, ok := Poll(30*time.Second, 100*time.Millisecond, func() bool {
		nw.mu.Lock()
		defer nw.mu.Unlock()
		for _, v := range nw.seen {
			if v.ResourceVersion == n.ResourceVersion {
				return true
			}
		}
		return len(nw.seen) == 0 && nw.from == n.ResourceVersion
	}); !ok {
		t.Errorf("node %s: the watch did not deliver the stored version %s within 30s", nw.name, n.ResourceVersion)
	}
	nw.w.Stop()
	<-nw.done
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.seen
}
