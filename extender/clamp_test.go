package extender

import (
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// withAllocatable sets the node's native allocatable; a negative amount
// leaves that resource out.
func withAllocatable(n *corev1.Node, cpuMilli, memBytes int64) *corev1.Node {
	n.Status.Allocatable = corev1.ResourceList{}
	if cpuMilli >= 0 {
		n.Status.Allocatable[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)
	}
	if memBytes >= 0 {
		n.Status.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(memBytes, resource.BinarySI)
	}
	return n
}

// A hand-edited annotation larger than the node never creates room: the
// extender schedules against min(annotation, native allocatable).
func TestFilterClampsAnnotationToAllocatable(t *testing.T) {
	f := newFixture(t, fixtureOpts{},
		withAllocatable(node("cpu-above", 64000, 4*gi, time.Minute), 4000, 16*gi),   // cpu clamped to 4000m
		withAllocatable(node("mem-above", 2000, 512*gi, time.Minute), 8000, 8*gi),   // memory clamped to 8Gi
		withAllocatable(node("both-above", 64000, 512*gi, time.Minute), 3000, 3*gi), // both clamped
		withAllocatable(node("within", 4000, 4*gi, time.Minute), 8000, 16*gi),       // not clamped
		withAllocatable(node("no-allocatable", 4000, 4*gi, time.Minute), -1, -1),    // lists none: no room
		withAllocatable(node("busy-above", 64000, 64*gi, time.Minute), 4000, 8*gi),
		pod("busy-1", "busy-above", 3000, 2*gi), // bound pods count against the clamped room
	)
	tests := []struct {
		name       string
		pod        *corev1.Pod
		nodes      []string
		wantPassed []string
		wantFailed map[string]string
	}{{
		name:       "cpu above allocatable is scheduled against allocatable",
		pod:        pod("p", "", 5000, gi),
		nodes:      []string{"cpu-above", "within"},
		wantPassed: []string{},
		wantFailed: map[string]string{
			"cpu-above": "reclaimed-cpu: need 5000m, free 4000m",
			"within":    "reclaimed-cpu: need 5000m, free 4000m",
		},
	}, {
		name:       "a pod that fits the clamped room passes",
		pod:        pod("p", "", 4000, gi),
		nodes:      []string{"cpu-above"},
		wantPassed: []string{"cpu-above"},
		wantFailed: map[string]string{},
	}, {
		name:       "memory above allocatable is scheduled against allocatable",
		pod:        pod("p", "", 1000, 9*gi),
		nodes:      []string{"mem-above"},
		wantPassed: []string{},
		wantFailed: map[string]string{"mem-above": "reclaimed-memory: need 9Gi, free 8Gi"},
	}, {
		name:       "both resources clamped at once",
		pod:        pod("p", "", 3500, 4*gi),
		nodes:      []string{"both-above"},
		wantPassed: []string{},
		wantFailed: map[string]string{"both-above": "reclaimed-cpu: need 3500m, free 3000m; reclaimed-memory: need 4Gi, free 3Gi"},
	}, {
		name:       "a node listing no allocatable offers no room",
		pod:        pod("p", "", 1, 0),
		nodes:      []string{"no-allocatable"},
		wantPassed: []string{},
		wantFailed: map[string]string{"no-allocatable": "reclaimed-cpu: need 1m, free 0m"},
	}, {
		name:       "bound pods are taken from the clamped room, not the annotated one",
		pod:        pod("p", "", 2000, gi),
		nodes:      []string{"busy-above"},
		wantPassed: []string{},
		wantFailed: map[string]string{"busy-above": "reclaimed-cpu: need 2000m, free 1000m"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.t = t
			res := f.filter(tt.pod, tt.nodes...)
			if got := deref(res.NodeNames); len(got) != len(tt.wantPassed) || (len(got) > 0 && got[0] != tt.wantPassed[0]) {
				t.Errorf("NodeNames = %v, want %v", got, tt.wantPassed)
			}
			for n, want := range tt.wantFailed {
				if got := res.FailedNodes[n]; got != want {
					t.Errorf("FailedNodes[%s] = %q, want %q", n, got, want)
				}
			}
			if len(res.FailedNodes) != len(tt.wantFailed) {
				t.Errorf("FailedNodes = %v, want %v", res.FailedNodes, tt.wantFailed)
			}
		})
	}
	f.t = t
	// A node counts under each resource it exceeds; no-allocatable exceeds both.
	for res, want := range map[string]float64{"cpu": 4, "memory": 4} {
		if got := testutil.ToFloat64(f.ext.server.metrics.cache.ClampedNodes.WithLabelValues(res)); got != want {
			t.Errorf("clamped_nodes{resource=%q} = %v, want %v", res, got, want)
		}
	}
}

// Prioritize scores the fraction of the clamped room left, so a node that
// claims more than it has does not attract pods.
func TestPrioritizeUsesClampedRoom(t *testing.T) {
	f := newFixture(t, fixtureOpts{},
		withAllocatable(node("liar", 64000, 64*gi, time.Minute), 4000, 4*gi),
		withAllocatable(node("honest", 4000, 4*gi, time.Minute), 4000, 4*gi),
	)
	list := f.prioritize(pod("p", "", 1000, gi), "liar", "honest")
	if list[0].Score != list[1].Score {
		t.Errorf("scores = %+v: the clamped node must score like the honest one", list)
	}
}

// The clamp is counted and logged when it starts and when it ends, not on
// every node update nor on every filter call.
func TestClampLoggedOncePerChange(t *testing.T) {
	hook := logtest.NewGlobal()
	defer hook.Reset()
	logrus.SetOutput(io.Discard) // the hook keeps the entries
	defer logrus.SetOutput(os.Stderr)
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.InfoLevel)
	defer logrus.SetLevel(level)

	f := newFixture(t, fixtureOpts{}, withAllocatable(node("n1", 2000, gi, time.Minute), 4000, 4*gi))
	ctx := t.Context()
	update := func(n *corev1.Node) {
		t.Helper()
		if _, err := f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		v := n.Annotations[testNames.Annotation]
		f.eventually("the node update", func() bool {
			f.ext.cache.RLock()
			defer f.ext.cache.RUnlock()
			e := f.ext.cache.EntryLocked([]byte("n1"))
			return e != nil && e.Annotation() == v
		})
	}
	clampLogs := func() (warn, info int) {
		for _, e := range hook.AllEntries() {
			if e.Data["node"] != "n1" {
				continue
			}
			switch e.Level {
			case logrus.WarnLevel:
				warn++
			case logrus.InfoLevel:
				info++
			}
		}
		return warn, info
	}
	gauge := func() float64 {
		return testutil.ToFloat64(f.ext.server.metrics.cache.ClampedNodes.WithLabelValues("cpu"))
	}
	if w, i := clampLogs(); w != 0 || i != 0 || gauge() != 0 {
		t.Fatalf("before any clamp: %d warnings, %d infos, gauge %v", w, i, gauge())
	}
	// Positive control: the first clamp is seen.
	update(withAllocatable(node("n1", 8000, gi, time.Minute), 4000, 4*gi))
	if w, _ := clampLogs(); w != 1 || gauge() != 1 {
		t.Fatalf("after the clamp started: %d warnings, gauge %v; want 1, 1", w, gauge())
	}
	// Still clamped: rewrites, other values and filter calls add nothing.
	for i := range 5 {
		update(withAllocatable(node("n1", 9000+int64(i), gi, time.Duration(i)*time.Second), 4000, 4*gi))
		f.filter(pod("p", "", 1000, 0), "n1")
	}
	if w, i := clampLogs(); w != 1 || i != 0 || gauge() != 1 {
		t.Errorf("while clamped: %d warnings, %d infos, gauge %v; want 1, 0, 1", w, i, gauge())
	}
	update(withAllocatable(node("n1", 3000, gi, time.Minute), 4000, 4*gi))
	if w, i := clampLogs(); w != 1 || i != 1 || gauge() != 0 {
		t.Errorf("after the clamp ended: %d warnings, %d infos, gauge %v; want 1, 1, 0", w, i, gauge())
	}
	// A deleted clamped node leaves the gauge.
	update(withAllocatable(node("n1", 8000, gi, time.Minute), 4000, 4*gi))
	if err := f.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the deleted node to leave the gauge", func() bool { return gauge() == 0 })
}

// The native room an annotation is clamped to is min(allocatable,
// capacity), each as the node lists it; a resource a list leaves out counts
// as 0, so a node cannot widen its room by leaving a list out.
func TestNativeRoomIsTheSmallerOfAllocatableAndCapacity(t *testing.T) {
	list := func(cpuMilli, memBytes int64) corev1.ResourceList {
		return withAllocatable(&corev1.Node{}, cpuMilli, memBytes).Status.Allocatable
	}
	tests := []struct {
		name                  string
		allocatable, capacity corev1.ResourceList
		want                  reclaimable.Resources
	}{
		{"allocatable below capacity", list(3000, 3*gi), list(4000, 4*gi), req(3000, 3*gi)},
		{"capacity below allocatable (a node writing its own status)", list(64000, 64*gi), list(2000, 2*gi), req(2000, 2*gi)},
		{"each resource takes its own minimum", list(8000, gi), list(2000, 4*gi), req(2000, gi)},
		{"no allocatable at all is no room", nil, list(4000, 4*gi), req(0, 0)},
		{"no capacity at all is no room", list(4000, 4*gi), nil, req(0, 0)},
		{"a resource missing from capacity is 0", list(4000, 4*gi), list(4000, -1), req(4000, 0)},
		{"a resource missing from allocatable is 0", list(-1, 4*gi), list(4000, 4*gi), req(0, 4*gi)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Allocatable: tt.allocatable, Capacity: tt.capacity}}
			if got := placement.NativeAllocatable(n); got != tt.want {
				t.Errorf("native room = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Through the informer and filter: a node whose capacity is below its
// allocatable, or that lists no capacity, offers only what the smaller
// allows; the positive control fits the same pod where both are big.
func TestFilterClampsAnnotationToCapacity(t *testing.T) {
	small := node("small-capacity", 8000, 8*gi, time.Minute)
	small.Status.Capacity = withAllocatable(&corev1.Node{}, 2000, 2*gi).Status.Allocatable
	none := node("no-capacity", 8000, 8*gi, time.Minute)
	none.Status.Capacity = nil
	f := newFixture(t, fixtureOpts{}, small, none, node("control", 8000, 8*gi, time.Minute))
	res := f.filter(pod("p", "", 3000, gi), "small-capacity", "no-capacity", "control")
	if got := deref(res.NodeNames); len(got) != 1 || got[0] != "control" {
		t.Errorf("NodeNames = %v, want only control", got)
	}
	want := map[string]string{"small-capacity": "reclaimed-cpu: need 3000m, free 2000m", "no-capacity": "reclaimed-cpu: need 3000m, free 0m; reclaimed-memory: need 1Gi, free 0"}
	if !reflect.DeepEqual(map[string]string(res.FailedNodes), want) {
		t.Errorf("FailedNodes = %v, want %v", res.FailedNodes, want)
	}
}
