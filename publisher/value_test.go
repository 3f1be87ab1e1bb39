package publisher

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestUnusedRequestsAreEachRegularPodsRequestMinusItsNewestUsage(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const stale = 3 * time.Minute
	h := policy.NewHistory(time.Hour, 10)
	series := func(key string, samples ...policy.Sample) policy.PodSeries {
		for _, s := range samples {
			h.AddPod([]byte(key), s)
		}
		return h.FindPod([]byte(key))
	}
	at := func(ago time.Duration, cpu, mem int64) policy.Sample {
		return policy.Sample{Time: now.Add(-ago), CPUMilli: cpu, MemoryBytes: mem}
	}
	req := func(cpu, mem int64) reclaimable.Resources {
		return reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	for _, tc := range []struct {
		name string
		pods []policy.Pod
		want reclaimable.Resources
	}{
		{"the newest sample counts, not an older peak",
			[]policy.Pod{{Name: "a", Requests: req(4000, 8<<30), Series: series("ns/a", at(60*time.Second, 3900, 7<<30), at(20*time.Second, 1000, 2<<30))}},
			req(3000, 6<<30)},
		{"a pod above its request does not hide another's idle request",
			[]policy.Pod{
				{Name: "b", Requests: req(1000, 1<<30), Series: series("ns/b", at(10*time.Second, 3000, 4<<30))},
				{Name: "c", Requests: req(2000, 2<<30), Series: series("ns/c", at(10*time.Second, 500, 1<<30))},
			},
			req(1500, 1<<30)},
		{"reclaimed pods are left out",
			[]policy.Pod{{Name: "d", Reclaimed: true, Grant: req(2000, 2<<30), Requests: req(2000, 2<<30), Series: series("ns/d", at(10*time.Second, 0, 0))}},
			req(0, 0)},
		{"a pod never measured counts as using its request",
			[]policy.Pod{{Name: "e", Requests: req(2000, 2<<30)}},
			req(0, 0)},
		{"a pod whose newest sample is stale counts as using its request",
			[]policy.Pod{{Name: "f", Requests: req(2000, 2<<30), Series: series("ns/f", at(stale+time.Second, 0, 0))}},
			req(0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unusedRequests(tc.pods, now, stale); got != tc.want {
				t.Errorf("unused %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A cycle sets what batch pods hold per node and over the cluster, what
// regular pods leave unused of their requests over the cluster, and the
// room, held and unused sums per pool; a pool gone after a reload loses its
// series, and without --per-node-metrics no series carries a node label.
func TestValueGaugesSumHeldUnusedAndRoomPerNodePoolAndCluster(t *testing.T) {
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	for _, perNode := range []bool{true, false} {
		t.Run(map[bool]string{true: "per-node", false: "no per-node"}[perNode], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			batch := func(name, node string, cpu, mem int64) *corev1.Pod {
				r := corev1.ResourceList{names.CPU: *resource.NewQuantity(cpu, resource.DecimalSI), names.Memory: *resource.NewQuantity(mem, resource.BinarySI)}
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: name},
					Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			}
			regular := func(name, node, cpu, mem string) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
					Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			}
			gpu := map[string]string{"kube-reclaim.io/pool": "gpu"}
			o := NewOptions()
			o.PerNodeMetrics = perNode
			reg := prometheus.NewRegistry()
			p, client := newTestPublisherWithRegistry(t, ctx, o, reg,
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "g1", Labels: gpu}},
				batch("b1", "n1", 2000, 2<<30), batch("b2", "n1", 1000, 1<<30), batch("b3", "g1", 500, 1<<30),
				regular("r1", "n1", "3", "4Gi"), regular("r2", "n2", "1", "1Gi"), regular("r3", "g1", "2", "2Gi"))
			// Usage of the regular pods: r1 leaves 2 cores and 3 GiB of its
			// request unused, r2 uses more than it asked (nothing unused), r3
			// has no sample (counts as using its request).
			mc := p.metrics.(*metricsfake.Clientset)
			for name, u := range map[string][2]string{"r1": {"1", "1Gi"}, "r2": {"2", "3Gi"}} {
				if err := mc.Tracker().Create(schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}, &metricsv1beta1.PodMetrics{
					ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
					Timestamp:  metav1.NewTime(time.Now().Add(-5 * time.Second)),
					Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(u[0]), corev1.ResourceMemory: resource.MustParse(u[1])}}},
				}, "apps"); err != nil {
					t.Fatal(err)
				}
			}
			cfg := policy.Default()
			cfg.Pools = []policy.Pool{{Name: "gpu", NodeSelector: gpu, Settings: policy.DefaultSettings()}}
			p.config.Store(cfg)
			p.Cycle(ctx)

			for _, c := range []struct {
				g    prometheus.Collector
				want float64
			}{
				{p.m.clusterHeldCPU, 3500}, {p.m.clusterHeldMem, 4 << 30},
				{p.m.clusterUnusedCPU, 2000}, {p.m.clusterUnusedMem, 3 << 30},
				{p.m.pool[2].WithLabelValues(""), 3000}, {p.m.pool[3].WithLabelValues(""), 3 << 30},
				{p.m.pool[2].WithLabelValues("gpu"), 500}, {p.m.pool[3].WithLabelValues("gpu"), 1 << 30},
				{p.m.pool[4].WithLabelValues(""), 2000}, {p.m.pool[5].WithLabelValues(""), 3 << 30},
				{p.m.pool[4].WithLabelValues("gpu"), 0}, {p.m.pool[5].WithLabelValues("gpu"), 0},
			} {
				if got := testutil.ToFloat64(c.g); got != c.want {
					t.Errorf("%s = %v, want %v", describe(c.g), got, c.want)
				}
			}
			// The pools' room adds up to the cluster's.
			for i, cluster := range []prometheus.Gauge{p.m.clusterCPU, p.m.clusterMem} {
				pools := testutil.ToFloat64(p.m.pool[i].WithLabelValues("")) + testutil.ToFloat64(p.m.pool[i].WithLabelValues("gpu"))
				if c := testutil.ToFloat64(cluster); pools != c || c == 0 {
					t.Errorf("%s: pools add up to %v, the cluster %v", describe(cluster), pools, c)
				}
			}
			wantNodeSeries := 0
			if perNode {
				wantNodeSeries = 3
				for node, want := range map[string]float64{"n1": 3000, "n2": 0, "g1": 500} {
					if got := testutil.ToFloat64(p.m.heldCPU.WithLabelValues(node)); got != want {
						t.Errorf("held CPU of %s = %v, want %v", node, got, want)
					}
				}
			}
			for _, name := range []string{"kube_reclaim_publisher_held_cpu_millicores", "kube_reclaim_publisher_held_memory_bytes"} {
				if n, err := testutil.GatherAndCount(reg, name); err != nil || n != wantNodeSeries {
					t.Errorf("%s: %d series (%v), want %d", name, n, err, wantNodeSeries)
				}
			}

			// Positive control for the removal below: the gpu pool has series.
			if n, err := testutil.GatherAndCount(reg, "kube_reclaim_publisher_pool_published_cpu_millicores"); err != nil || n != 2 {
				t.Fatalf("pool room: %d series (%v), want 2", n, err)
			}
			p.config.Store(policy.Default())
			p.Cycle(ctx)
			for i := range p.m.pool {
				if n := testutil.CollectAndCount(p.m.pool[i]); n != 1 {
					t.Errorf("%s: %d series after the gpu pool went, want the default's alone", describe(p.m.pool[i]), n)
				}
			}
			if got := testutil.ToFloat64(p.m.pool[2].WithLabelValues("")); got != 3500 {
				t.Errorf("held in the default settings after the reload = %v, want 3500", got)
			}

			// A node gone loses its per-node series.
			if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return storedNode(p.nodes, "n2") == nil, nil
			}); err != nil {
				t.Fatal("the informer never saw n2 deleted")
			}
			p.Cycle(ctx)
			if n, err := testutil.GatherAndCount(reg, "kube_reclaim_publisher_held_cpu_millicores"); err != nil || n != max(wantNodeSeries-1, 0) {
				t.Errorf("held CPU per node: %d series (%v) after n2 went, want %d", n, err, max(wantNodeSeries-1, 0))
			}
		})
	}
}

// describe names a collector's metric for a test message.
func describe(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 1)
	go func() { c.Describe(ch); close(ch) }()
	d := <-ch
	for range ch {
	}
	return d.String()
}
