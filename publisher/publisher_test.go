package publisher

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	o := NewOptions()
	o.Period = 0
	o.Workers = 0
	o.DecreaseThreshold = 2
	o.LeaderElection.RenewDeadline.Duration = time.Minute
	o.ConfigMap = "no-slash"
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--period", "--workers", "--decrease-threshold", "--leader-elect-renew-deadline", "--config-map"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
	if err := NewOptions().Validate(); err != nil {
		t.Errorf("defaults are invalid: %v", err)
	}
}

// newTestPublisher runs a publisher against fake clients holding objs. Nodes
// among them each use 2 cores and 1 GiB of 10 cores and 10 GiB (so the usage
// policy publishes 4500m and 10Gi x 0.65 - 1Gi), and their status has no
// reclaimed resources.
func newTestPublisher(t *testing.T, ctx context.Context, objs ...runtime.Object) (*Publisher, *fake.Clientset) {
	t.Helper()
	return newTestPublisherWith(t, ctx, NewOptions(), objs...)
}

func newTestPublisherWith(t *testing.T, ctx context.Context, o *Options, objs ...runtime.Object) (*Publisher, *fake.Clientset) {
	t.Helper()
	return newTestPublisherWithRegistry(t, ctx, o, prometheus.NewRegistry(), objs...)
}

func newTestPublisherWithRegistry(t *testing.T, ctx context.Context, o *Options, reg prometheus.Registerer, objs ...runtime.Object) (*Publisher, *fake.Clientset) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("10Gi")}
	mc := metricsfake.NewSimpleClientset()
	for _, o := range objs {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		// Native cpu and memory; extended resources the node came with stay.
		st := corev1.NodeStatus{Capacity: res.DeepCopy(), Allocatable: res.DeepCopy()}
		maps.Copy(st.Capacity, n.Status.Capacity)
		maps.Copy(st.Allocatable, n.Status.Allocatable)
		n.Status = st
		// The fake tracker would guess the resource "nodemetricses"; the client lists "nodes".
		if err := mc.Tracker().Create(schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "nodes"}, &metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Timestamp:  metav1.NewTime(time.Now().Add(-5 * time.Second)),
			Usage:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}, ""); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewSimpleClientset(objs...)
	p := newPublisher(o, client, mc, reg)
	p.startInformers(ctx, new(sync.WaitGroup))
	if !cache.WaitForCacheSync(ctx.Done(), p.hasSynced...) {
		t.Fatal("informers not synced")
	}
	return p, client
}

const wantCPU, wantMem = int64(4500), int64(10<<30)*65/100 - (1 << 30)

func annotation(t *testing.T, client *fake.Clientset, node string) reclaimable.Annotation {
	t.Helper()
	got, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := reclaimable.Parse(got.Annotations[reclaimable.MustNames(reclaimable.DefaultDomain).Annotation])
	if err != nil {
		t.Fatalf("annotation: %v", err)
	}
	return a
}

// sentPatch is one node patch the publisher sent.
type sentPatch struct {
	subresource string
	nodePatch
}

func nodePatches(actions []k8stesting.Action) []sentPatch {
	var out []sentPatch
	for _, a := range actions {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "nodes" {
			continue
		}
		sp := sentPatch{subresource: pa.GetSubresource()}
		if err := json.Unmarshal(pa.GetPatch(), &sp.nodePatch); err != nil {
			panic(fmt.Sprintf("publisher sent a patch that is not JSON: %v", err))
		}
		out = append(out, sp)
	}
	return out
}

// The first publish of a node is one API write: a merge patch of
// nodes/status carrying the annotation and the status values together.
func TestFirstPublishIsOneStatusPatchCarryingAnnotationAndStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	p, client := newTestPublisher(t, ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	before := len(client.Actions())
	p.Cycle(ctx)
	patches := nodePatches(client.Actions()[before:])
	if len(patches) != 1 {
		t.Fatalf("%d node patches, want 1: %+v", len(patches), patches)
	}
	got := patches[0]
	if got.subresource != "status" {
		t.Errorf("patched subresource %q, want status", got.subresource)
	}
	if got.Metadata == nil || got.Metadata.Annotations[names.Annotation] == "" {
		t.Errorf("patch carries no annotation: %+v", got)
	}
	if got.Status == nil || got.Status.Capacity[string(names.CPU)] != quantity(wantCPU) ||
		got.Status.Allocatable[string(names.Memory)] != quantity(wantMem) {
		t.Errorf("patch status %+v, want cpu %d and memory %d in capacity and allocatable", got.Status, wantCPU, wantMem)
	}
}

// --per-node-metrics=false drops the two per-node gauges; the cluster sums
// are exported either way and add up the nodes' room.
func TestPerNodeMetricsSwitchKeepsClusterSums(t *testing.T) {
	for _, perNode := range []bool{true, false} {
		t.Run(fmt.Sprintf("per-node=%v", perNode), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := NewOptions()
			o.PerNodeMetrics = perNode
			reg := prometheus.NewRegistry()
			p, _ := newTestPublisherWithRegistry(t, ctx, o, reg,
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}})
			p.Cycle(ctx)
			wantSeries := 0
			if perNode {
				wantSeries = 2
			}
			for _, name := range []string{"kube_reclaim_publisher_published_cpu_millicores", "kube_reclaim_publisher_published_memory_bytes"} {
				if n, err := testutil.GatherAndCount(reg, name); err != nil || n != wantSeries {
					t.Errorf("%s has %d series (err %v), want %d", name, n, err, wantSeries)
				}
			}
			for _, c := range []struct {
				name string
				g    prometheus.Gauge
				want float64
			}{
				{"cluster_published_cpu_millicores", p.m.clusterCPU, 2 * float64(wantCPU)},
				{"cluster_published_memory_bytes", p.m.clusterMem, 2 * float64(wantMem)},
				{"nodes_with_room", p.m.nodesWithRoom, 2},
			} {
				if got := testutil.ToFloat64(c.g); got != c.want {
					t.Errorf("%s = %v, want %v", c.name, got, c.want)
				}
			}
		})
	}
}

// A full cycle against fake clients: the annotation and equal status values
// are written, and a second cycle with the same usage writes nothing.
func TestCyclePublishesAnnotationAndStatusThenStaysQuiet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	p, client := newTestPublisher(t, ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	p.Cycle(ctx)

	a := annotation(t, client, "n1")
	if a.CPUMilli != wantCPU || a.MemoryBytes != wantMem {
		t.Errorf("annotation cpu=%d mem=%d, want %d and %d", a.CPUMilli, a.MemoryBytes, wantCPU, wantMem)
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []corev1.ResourceList{got.Status.Capacity, got.Status.Allocatable} {
		if q := l[names.CPU]; q.Value() != wantCPU {
			t.Errorf("status cpu %s, want %d", q.String(), wantCPU)
		}
		if q := l[names.Memory]; q.Value() != wantMem {
			t.Errorf("status memory %s, want %d", q.String(), wantMem)
		}
	}

	// Let the informer see the write, then a cycle with unchanged usage writes nothing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n := storedNode(p.nodes, "n1"); n != nil && n.Published != nil {
			if v := n.Status; v != nil && *v == (reclaimable.Resources{CPUMilli: wantCPU, MemoryBytes: wantMem}) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("informer never saw the write")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := len(client.Actions())
	p.Cycle(ctx)
	for _, a := range client.Actions()[before:] {
		if a.GetVerb() == "patch" {
			t.Errorf("steady state wrote: %s %s", a.GetVerb(), a.GetSubresource())
		}
	}
}

// The cycle hands every node to the eviction controller, measured, and
// lets it act. With --eviction=on, reclaimed pods holding 6000m of a 4500m
// room evict nothing while their memory is low; once the pods' measured
// memory passes 90 % of allocatable, the first cycle past the grace evicts
// the lowest-priority pod, which alone brings it under 85 %. This also
// shows that the informer's trimmed pods keep the priority.
func TestCycleEvictsOnMeasuredMemoryPressureNotOnARoomBelowWhatIsHeld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	batch := func(name string, prio int32) *corev1.Pod {
		l := corev1.ResourceList{names.CPU: resource.MustParse("2000"), names.Memory: resource.MustParse("3Gi")}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: name, UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: "n1", Priority: &prio, Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: l, Limits: l}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	o := NewOptions()
	const grace = 100 * time.Millisecond
	o.Eviction.Mode, o.Eviction.Grace, o.Period = eviction.ModeOn, grace, 20*time.Millisecond
	p, client := newTestPublisherWith(t, ctx, o, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		batch("high", 100), batch("low", 1), batch("mid", 50))
	var evicted []string
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			evicted = append(evicted, a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name)
			return true, nil, nil
		}
		return false, nil, nil
	})
	mc := p.metrics.(*metricsfake.Clientset)
	podsGVR := schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}
	// use sets every batch pod's measured memory, as of now.
	use := func(mem string, create bool) {
		for _, n := range []string{"high", "low", "mid"} {
			m := &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: n}, Timestamp: metav1.NewTime(time.Now()),
				Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse(mem)}}}}
			err := mc.Tracker().Update(podsGVR, m, "batch")
			if create {
				err = mc.Tracker().Create(podsGVR, m, "batch")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	use("1Gi", true) // 3Gi of 10Gi
	start := time.Now()
	for time.Since(start) < 10*grace {
		p.Cycle(ctx)
		if len(evicted) != 0 {
			t.Fatalf("evicted %v with 6000m held over a %dm room and memory at 30 %%", evicted, wantCPU)
		}
		time.Sleep(o.Period)
	}
	// Positive control: 3 x 3.1Gi = 9.3Gi, above 9Gi.
	time.Sleep(time.Second) // a sample newer, by whole seconds, than the last
	use("3174Mi", false)
	first := time.Now() // no later than the first cycle's look at the node
	p.Cycle(ctx)
	if len(evicted) != 0 {
		t.Fatalf("evicted %v in the first cycle over the threshold, before any grace", evicted)
	}
	for len(evicted) == 0 && time.Since(first) < 5*time.Second {
		time.Sleep(o.Period)
		p.Cycle(ctx)
	}
	if took := time.Since(first); took < grace-o.Period/10 {
		t.Errorf("evicted %s after the first cycle over the threshold, before the %s grace", took, grace)
	}
	if want := []string{"low"}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want %v (9.3Gi of 10Gi, one pod of 3.1Gi brings it under 8.5Gi)", evicted, want)
	}
}

func annotatedNode(t *testing.T, name string, v reclaimable.Resources, written time.Time) *corev1.Node {
	t.Helper()
	value, err := reclaimable.Annotation{CPUMilli: v.CPUMilli, MemoryBytes: v.MemoryBytes, Policy: "usage", WriteTime: written}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{reclaimable.MustNames(reclaimable.DefaultDomain).Annotation: value}}}
}

// A decrease below --decrease-threshold waits, but only until the refresh
// (the refresh writes the true value rather than sealing the old one again),
// and not at all when reclaimed pods on the node hold more than the new value.
func TestSmallDecreaseWaitsForTheRefreshOrHeldRoomAndNoLonger(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	// 0.4 % above what the policy now computes: measurement noise.
	noisy := reclaimable.Resources{CPUMilli: wantCPU + 18, MemoryBytes: wantMem}
	cpu := resource.MustParse(fmt.Sprintf("%d", wantCPU+10))
	holder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "holder"},
		Spec: corev1.PodSpec{NodeName: "held", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{names.CPU: cpu}, Limits: corev1.ResourceList{names.CPU: cpu}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	p, client := newTestPublisher(t, ctx,
		annotatedNode(t, "recent", noisy, time.Now().Add(-time.Minute)),
		annotatedNode(t, "due", noisy, time.Now().Add(-6*time.Minute)),
		annotatedNode(t, "held", noisy, time.Now().Add(-time.Minute)), holder)
	p.Cycle(ctx)
	if a := annotation(t, client, "recent"); a.CPUMilli != wantCPU+18 {
		t.Errorf("recent annotation: cpu %d, want the noise suppressed (%d)", a.CPUMilli, wantCPU+18)
	}
	if a := annotation(t, client, "due"); a.CPUMilli != wantCPU || time.Since(a.WriteTime) > time.Minute {
		t.Errorf("refreshed annotation: cpu %d written %s, want %d written now", a.CPUMilli, a.WriteTime, wantCPU)
	}
	if a := annotation(t, client, "held"); a.CPUMilli != wantCPU {
		t.Errorf("annotation under held room: cpu %d, want the decrease to %d published at once", a.CPUMilli, wantCPU)
	}
}

// kubelet re-registration can drop extended resources from the status: with
// the annotation current, only the status is rewritten, with its values.
func TestCurrentAnnotationWithoutStatusRewritesOnlyTheStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	current := reclaimable.Resources{CPUMilli: wantCPU, MemoryBytes: wantMem}
	p, client := newTestPublisher(t, ctx, annotatedNode(t, "n1", current, time.Now().Add(-time.Minute)))
	before := len(client.Actions())
	p.Cycle(ctx)
	patches := nodePatches(client.Actions()[before:])
	if len(patches) != 1 || patches[0].subresource != "status" || patches[0].Metadata != nil || patches[0].Status == nil {
		t.Errorf("patches %+v, want one of nodes/status carrying status values and no annotation", patches)
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := statusFloor(p.names, got); v == nil || *v != current {
		t.Errorf("status carries %+v, want %+v", v, current)
	}
	// Count the series first: reading one creates it.
	if n, got := testutil.CollectAndCount(p.m.writes), testutil.ToFloat64(p.m.writes.WithLabelValues("status", "status-mismatch")); n != 1 || got != 1 {
		t.Errorf("writes_total has %d series and status/status-mismatch = %v, want only status/status-mismatch once", n, got)
	}
}

// With stale metrics the room drops to zero, but the status stays at what the
// node's reclaimed pods hold, and the annotation says what they held so that
// the webhook applies the same floor; a node holding nothing goes to zero.
func TestStaleMetricsDropTheRoomButKeepTheStatusAtWhatIsHeld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	grant := corev1.ResourceList{names.CPU: resource.MustParse("4000"), names.Memory: resource.MustParse("1Gi")}
	pod := func(name, phase string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: name},
			Spec: corev1.PodSpec{NodeName: "busy", Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: grant, Limits: grant}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
	}
	room := reclaimable.Resources{CPUMilli: 6000, MemoryBytes: 4 << 30}
	p, client := newTestPublisher(t, ctx,
		annotatedNode(t, "busy", room, time.Now().Add(-time.Minute)),
		annotatedNode(t, "idle", room, time.Now().Add(-time.Minute)),
		pod("running", "Running"), pod("finished", "Succeeded"))
	// Every sample of newTestPublisher is 5 s old.
	p.opts.MetricsStaleAfter = time.Second
	p.Cycle(ctx)

	for _, tc := range []struct {
		node         string
		held, status reclaimable.Resources
	}{
		{"busy", reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 1 << 30}, reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 1 << 30}},
		{"idle", reclaimable.Resources{}, reclaimable.Resources{}},
	} {
		a := annotation(t, client, tc.node)
		if !a.Room().IsZero() || a.Held == nil || *a.Held != tc.held {
			t.Errorf("%s: annotation room %+v held %+v, want zero room and held %+v", tc.node, a.Room(), a.Held, tc.held)
		}
		got, err := client.CoreV1().Nodes().Get(ctx, tc.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := statusFloor(p.names, got); v == nil || *v != tc.status {
			t.Errorf("%s: status carries %+v, want %+v", tc.node, v, tc.status)
		}
	}
}

// The node cache keeps what evaluate reads, the annotation parsed once per
// change of its text rather than on every heartbeat.
func TestNodeRecordKeepsWhatEvaluateReads(t *testing.T) {
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	written := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	text := func(cpu int64) string {
		v, err := reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: 2048, Held: &reclaimable.Resources{CPUMilli: 100},
			Policy: "usage", WriteTime: written}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	full := func(rv, annotation string) *corev1.Node {
		listed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			names.CPU: resource.MustParse("500"), names.Memory: resource.MustParse("2048"), corev1.ResourcePods: resource.MustParse("110")}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", ResourceVersion: rv, Labels: map[string]string{"pool": "a"},
				Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
			Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
			Status: corev1.NodeStatus{Capacity: listed, Allocatable: listed.DeepCopy(),
				Images:     []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1 << 30}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
		if annotation != "" {
			n.Annotations[names.Annotation] = annotation
		}
		return n
	}
	var held *nodeRecord
	convert := nodeRecords(names, func(name string) *nodeRecord {
		if held != nil && held.Name == name {
			return held
		}
		return nil
	})
	record := func(n *corev1.Node) *nodeRecord {
		t.Helper()
		r, ok := convert(n).(*nodeRecord)
		if !ok {
			t.Fatalf("converted to %T", convert(n))
		}
		held = r
		return r
	}

	got := record(full("7", text(500)))
	if key, err := cache.MetaNamespaceKeyFunc(got); err != nil || key != "n1" || got.ResourceVersion != "7" {
		t.Errorf("key %q (%v), resourceVersion %q: want n1 and 7, the reflector reads it from bookmarks", key, err, got.ResourceVersion)
	}
	native := reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 32 << 30}
	if got.Capacity != native || got.Allocatable != native || got.Labels["pool"] != "a" {
		t.Errorf("record %+v, want native %+v and the labels", got, native)
	}
	if got.Status == nil || *got.Status != (reclaimable.Resources{CPUMilli: 500, MemoryBytes: 2048}) {
		t.Errorf("status values %+v, want 500 / 2048", got.Status)
	}
	want := policy.Published{Room: reclaimable.Resources{CPUMilli: 500, MemoryBytes: 2048}, Held: reclaimable.Resources{CPUMilli: 100}, WriteTime: written}
	if got.Published == nil || *got.Published != want {
		t.Fatalf("published %+v, want %+v", got.Published, want)
	}

	// A heartbeat: a new resourceVersion, the same annotation.
	first := got.Published
	if got = record(full("8", text(500))); got.Published != first {
		t.Errorf("the unchanged annotation was parsed again (%p, then %p)", first, got.Published)
	}
	// A publish changes it.
	if got = record(full("9", text(300))); got.Published == first || got.Published == nil || got.Published.Room.CPUMilli != 300 {
		t.Errorf("after a publish of 300m the record says %+v", got.Published)
	}
	// Allocatable unlike capacity, no annotation, an annotation that does
	// not parse: nothing to compare with.
	odd := full("10", "")
	odd.Status.Allocatable[names.CPU] = resource.MustParse("400")
	if got = record(odd); got.Status != nil || got.Published != nil {
		t.Errorf("status %+v and published %+v, want neither", got.Status, got.Published)
	}
	if got = record(full("11", "{not json")); got.Published != nil {
		t.Errorf("an annotation that does not parse says %+v", got.Published)
	}
	if again := convert(got); again != got {
		t.Errorf("a record was converted again: %+v", again)
	}
	cp := got.DeepCopyObject().(*nodeRecord)
	cp.Name = "other"
	if got.Name != "n1" {
		t.Error("the copy is the original")
	}
}

// The store follows the reflector as client-go drives it: additions,
// updates and deletions from the watch (a deletion carries the pod as the
// watch last saw it, a record of its own), and whole listings on a relist.
func TestPodStoreFollowsTheReflectorFromCycleToCycle(t *testing.T) {
	pod := func(name, uid, node string) *policyinput.Pod {
		return &policyinput.Pod{Namespace: "ns", Name: name, UID: types.UID(uid), NodeName: node}
	}
	p := &Publisher{pods: newPodStore(), podsByNode: map[string][]*policyinput.Pod{}}
	names := func(node string) []string {
		var out []string
		for _, pod := range p.podsOn(node) {
			out = append(out, pod.Name)
		}
		slices.Sort(out)
		return out
	}
	check := func(when string, want map[string][]string) {
		t.Helper()
		p.groupPods()
		for node, pods := range want {
			if got := names(node); !slices.Equal(got, pods) {
				t.Errorf("%s: %s holds %v, want %v", when, node, got, pods)
			}
		}
		if len(p.podsByNode) != len(want) {
			t.Errorf("%s: grouped under %d nodes, want %d (a node without pods has no group)", when, len(p.podsByNode), len(want))
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.pods.hasSynced() {
		t.Fatal("synced before the first listing")
	}
	a, b, c, pending := pod("a", "1", "n1"), pod("b", "2", "n1"), pod("c", "3", "n2"), pod("pending", "4", "")
	must(p.pods.Replace([]any{a, b, c, pending}, "10"))
	if !p.pods.hasSynced() {
		t.Error("not synced after the first listing")
	}
	check("listed", map[string][]string{"n1": {"a", "b"}, "n2": {"c"}})

	must(p.pods.Delete(pod("b", "2", "n1"))) // the watch's own copy
	a2 := pod("a", "1", "n1")
	must(p.pods.Update(a2)) // a status change
	must(p.pods.Update(pod("pending", "4", "n2")))
	check("b deleted, pending bound", map[string][]string{"n1": {"a"}, "n2": {"c", "pending"}})
	if got := p.podsByNode["n1"][0]; got != a2 {
		t.Errorf("n1 holds %p after the update, want the new record %p", got, a2)
	}
	// The cycle's copy stays as it was until the next cycle: the
	// reflector goes on while a cycle reads it.
	must(p.pods.Update(pod("a", "1", "n1")))
	must(p.pods.Add(pod("d", "7", "n1")))
	if got := p.podsByNode["n1"]; len(got) != 1 || got[0] != a2 {
		t.Errorf("the cycle's copy changed after it was made: %v", got)
	}
	must(p.pods.Delete(pod("d", "7", "n1")))
	must(p.pods.Delete(pod("gone", "6", "n3"))) // never stored: nothing happens
	must(p.pods.Delete(pod("unbound", "8", "")))
	check("d come and gone", map[string][]string{"n1": {"a"}, "n2": {"c", "pending"}})

	// The watch broke while c was deleted and a new c (another UID) took
	// its name on n1: the relist replaces everything.
	c5 := pod("c", "5", "n1")
	must(p.pods.Replace([]any{pod("a", "1", "n1"), c5, pod("pending", "4", "n2")}, "20"))
	check("relisted", map[string][]string{"n1": {"a", "c"}, "n2": {"pending"}})
	if i := slices.Index(p.podsByNode["n1"], c5); i < 0 {
		t.Errorf("n1 does not hold the relisted c: %v", p.podsByNode["n1"])
	}
	must(p.pods.Delete(pod("pending", "4", "n2")))
	check("n2 emptied", map[string][]string{"n1": {"a", "c"}})

	if err := p.pods.Add(&corev1.Pod{}); err == nil {
		t.Error("a full Pod was stored; the store takes only records")
	}
}

func TestRefreshBudgetIsTwiceTheSteadyRate(t *testing.T) {
	for _, tc := range []struct {
		name            string
		nodes           int
		period, refresh time.Duration
		want            int
	}{
		{"5,000 nodes at the defaults", 5000, 15 * time.Second, 5 * time.Minute, 500},
		{"a rounded-up share", 5001, 15 * time.Second, 5 * time.Minute, 501},
		{"a small cluster writes at least the minimum", 1000, 15 * time.Second, 5 * time.Minute, minRefreshesPerCycle},
		{"no refresh interval: no limit", 5000, 15 * time.Second, 0, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refreshBudget(tc.nodes, tc.period, tc.refresh); got != tc.want {
				t.Errorf("refreshBudget(%d, %s, %s) = %d, want %d", tc.nodes, tc.period, tc.refresh, got, tc.want)
			}
		})
	}
}

// Refreshes due together (after the first cycle every annotation carries
// that cycle's time) are written the oldest first, a budget per cycle, each
// once; any other reason to write does not wait.
func TestRefreshesDueTogetherAreSpreadOverCyclesOldestFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	o := NewOptions()
	o.Period, o.RefreshInterval = time.Second, time.Minute // budget: minRefreshesPerCycle
	current := reclaimable.Resources{CPUMilli: wantCPU, MemoryBytes: wantMem}
	status := corev1.ResourceList{names.CPU: *resource.NewQuantity(wantCPU, resource.DecimalSI), names.Memory: *resource.NewQuantity(wantMem, resource.DecimalSI)}
	const due = 2*minRefreshesPerCycle + 50
	oldest := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var objs []runtime.Object
	for i := range due {
		n := annotatedNode(t, fmt.Sprintf("n%03d", i), current, oldest.Add(time.Duration(i)*time.Second))
		n.Status = corev1.NodeStatus{Capacity: status.DeepCopy(), Allocatable: status.DeepCopy()}
		objs = append(objs, n)
	}
	// Due as well, and the newest, but the room of one went down (not a
	// refresh) and the status of the other lacks the values (kubelet admits
	// against it): neither waits.
	objs = append(objs, annotatedNode(t, "lowered", reclaimable.Resources{CPUMilli: 2 * wantCPU, MemoryBytes: wantMem}, time.Now().Add(-2*time.Minute)),
		annotatedNode(t, "unstatused", current, time.Now().Add(-2*time.Minute)))
	p, client := newTestPublisherWith(t, ctx, o, objs...)

	patched := map[string]int{}
	cycle := func() []string {
		t.Helper()
		client.ClearActions()
		p.Cycle(ctx)
		var got []string
		for _, a := range client.Actions() {
			if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetSubresource() == "status" {
				got = append(got, pa.GetName())
				patched[pa.GetName()]++
			}
		}
		slices.Sort(got)
		// The next cycle must see these writes, as it would 15 s later.
		for _, name := range got {
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				n := storedNode(p.nodes, name)
				return n != nil && n.Published != nil && time.Since(n.Published.WriteTime) < time.Minute, nil
			}); err != nil {
				t.Fatalf("the informer never saw the write of %s", name)
			}
		}
		return got
	}
	nodeNames := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("n%03d", i))
		}
		return out
	}

	first := cycle()
	if want := append(append([]string{"lowered"}, nodeNames(0, minRefreshesPerCycle)...), "unstatused"); !slices.Equal(first, want) {
		t.Errorf("first cycle wrote %d nodes %v..., want the %d oldest, the lowered and the unstatused one", len(first), first[:min(3, len(first))], minRefreshesPerCycle)
	}
	if got := testutil.ToFloat64(p.m.refreshesDeferred); got != due-minRefreshesPerCycle {
		t.Errorf("refreshes deferred after the first cycle: %v, want %d", got, due-minRefreshesPerCycle)
	}
	if second := cycle(); !slices.Equal(second, nodeNames(minRefreshesPerCycle, 2*minRefreshesPerCycle)) {
		t.Errorf("second cycle wrote %d nodes, want the next %d oldest", len(second), minRefreshesPerCycle)
	}
	if third := cycle(); !slices.Equal(third, nodeNames(2*minRefreshesPerCycle, due)) {
		t.Errorf("third cycle wrote %d nodes, want the last %d", len(third), due-2*minRefreshesPerCycle)
	}
	if fourth := cycle(); len(fourth) != 0 {
		t.Errorf("a fourth cycle wrote %v, want nothing left", fourth)
	}
	for name, n := range patched {
		if n != 1 {
			t.Errorf("%s written %d times, want once", name, n)
		}
	}
	if len(patched) != due+2 {
		t.Errorf("%d nodes written, want %d", len(patched), due+2)
	}
}
