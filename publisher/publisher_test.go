package publisher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	o := NewOptions()
	o.Period = 0
	o.Workers = 0
	o.DecreaseThreshold = 2
	o.RenewDeadline = time.Minute
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

func req(cpu, mem int64) reclaimable.Request {
	return reclaimable.Request{CPUMilli: cpu, MemoryBytes: mem}
}

func TestSuppressNoise(t *testing.T) {
	p := &Publisher{opts: &Options{DecreaseThreshold: 0.01}}
	prev := policy.Resources{CPUMilli: 10000, MemoryBytes: 1000}
	cases := []struct {
		name           string
		next, promised reclaimable.Request
		want           reclaimable.Request
	}{
		{"a decrease below the threshold keeps the published value", req(9950, 995), req(0, 0), req(10000, 1000)},
		{"a decrease at the threshold is published", req(9900, 990), req(0, 0), req(9900, 990)},
		{"a small decrease under promised room is published at once", req(9950, 1000), req(9990, 0), req(9950, 1000)},
		{"an increase passes through to the change gate", req(10500, 1001), req(0, 0), req(10500, 1001)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.suppressNoise(prev, tc.next, tc.promised); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// newTestPublisher runs a publisher against fake clients holding nodes that
// each use 2 cores and 1 GiB of 10 cores and 10 GiB (so the usage policy
// publishes 4500m and 10Gi x 0.65 - 1Gi).
func newTestPublisher(t *testing.T, ctx context.Context, nodes ...*corev1.Node) (*Publisher, *fake.Clientset) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("10Gi")}
	objs := make([]runtime.Object, 0, len(nodes))
	mc := metricsfake.NewSimpleClientset()
	for _, n := range nodes {
		n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res}
		objs = append(objs, n)
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
	p := New(NewOptions(), client, mc, prometheus.NewRegistry())
	p.startInformers(ctx)
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
		n, _ := p.nodes.Get("n1")
		if n != nil && n.Annotations[names.Annotation] != "" && p.statusMatches(n, reclaimable.Request{CPUMilli: wantCPU, MemoryBytes: wantMem}) {
			break
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

// A decrease below --decrease-threshold waits, but only until the refresh:
// the refresh writes the true value rather than sealing the old one again.
func TestSmallDecreaseWaitsForTheRefreshAndNoLonger(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	old := func(name string, written time.Time) *corev1.Node {
		// 0.4 % above what the policy now computes: measurement noise.
		v, err := reclaimable.Annotation{CPUMilli: wantCPU + 18, MemoryBytes: wantMem, Policy: "usage", WriteTime: written}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{names.Annotation: v}}}
	}
	p, client := newTestPublisher(t, ctx, old("recent", time.Now().Add(-time.Minute)), old("due", time.Now().Add(-6*time.Minute)))
	p.Cycle(ctx)
	if a := annotation(t, client, "recent"); a.CPUMilli != wantCPU+18 {
		t.Errorf("recent annotation: cpu %d, want the noise suppressed (%d)", a.CPUMilli, wantCPU+18)
	}
	if a := annotation(t, client, "due"); a.CPUMilli != wantCPU || time.Since(a.WriteTime) > time.Minute {
		t.Errorf("refreshed annotation: cpu %d written %s, want %d written now", a.CPUMilli, a.WriteTime, wantCPU)
	}
}
