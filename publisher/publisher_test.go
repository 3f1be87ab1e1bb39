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

// A full cycle against fake clients: the annotation and equal status values
// are written, and a second cycle with the same usage writes nothing.
func TestCyclePublishesAnnotationAndStatusThenStaysQuiet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("10Gi")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
	client := fake.NewSimpleClientset(node)
	now := time.Now()
	mc := metricsfake.NewSimpleClientset()
	// The fake tracker would guess the resource "nodemetricses"; the client lists "nodes".
	if err := mc.Tracker().Create(schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "nodes"}, &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Timestamp:  metav1.NewTime(now.Add(-5 * time.Second)),
		Usage:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}, ""); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	p := New(o, client, mc, prometheus.NewRegistry())
	p.startInformers(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), p.hasSynced...) {
		t.Fatal("informers not synced")
	}
	p.Cycle(ctx)

	got, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := reclaimable.Parse(got.Annotations[names.Annotation])
	if err != nil {
		t.Fatalf("annotation: %v", err)
	}
	// usage policy: 10000 x 0.65 - 2000 = 4500m; 10Gi x 0.65 - 1Gi.
	wantCPU, wantMem := int64(4500), int64(10<<30)*65/100-(1<<30)
	if a.CPUMilli != wantCPU || a.MemoryBytes != wantMem {
		t.Errorf("annotation cpu=%d mem=%d, want %d and %d", a.CPUMilli, a.MemoryBytes, wantCPU, wantMem)
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
