package webhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// heldAnnotation is annotationValue with what reclaimed pods held.
func heldAnnotation(cpu, memory, heldCPU, heldMemory int64, written time.Time) string {
	return fmt.Sprintf(`{"cpu":%d,"memory":%d,"held":{"cpuMilli":%d,"memoryBytes":%d},"policy":"usage","metricsTime":%q,"writeTime":%q}`,
		cpu, memory, heldCPU, heldMemory, written.Add(-30*time.Second).Format(time.RFC3339), written.Format(time.RFC3339))
}

// The floor is max(room, held): with a stale annotation or a dead
// publisher the room is zero but what was held stays, so a kubelet restart
// re-admits the running reclaimed pods. Nothing exceeds the node's native
// allocatable (newNode: 3800m and 15Gi).
func TestFloorIsTheRoomAtLeastWhatWasHeldAndClampedToNative(t *testing.T) {
	recent, old := testNow.Add(-time.Minute), testNow.Add(-11*time.Minute)
	const gi = int64(1 << 30)
	cases := []struct {
		name             string
		node             func() node
		alive            bool
		wantCPU, wantMem string
		clampedCPU       float64
		clampedMem       float64
	}{
		{name: "a fresh room above what is held is the floor",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(2500, 6*gi, 1000, gi, recent)) },
			alive: true, wantCPU: "2500", wantMem: fmt.Sprint(6 * gi)},
		{name: "held above a fresh room after a usage spike is the floor",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(0, 6*gi, 3000, 8*gi, recent)) },
			alive: true, wantCPU: "3000", wantMem: fmt.Sprint(8 * gi)},
		{name: "a stale annotation keeps what was held instead of zero",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(2500, 6*gi, 1000, gi, old)) },
			alive: true, wantCPU: "1000", wantMem: fmt.Sprint(gi)},
		{name: "a dead publisher keeps what was held instead of zero",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(2500, 6*gi, 1000, gi, recent)) },
			alive: false, wantCPU: "1000", wantMem: fmt.Sprint(gi)},
		{name: "a stale annotation without held sets zero",
			node:  func() node { return newNode("n1").setAnnotation(annKey, annotationValue(2500, 6*gi, old)) },
			alive: true, wantCPU: "0", wantMem: "0"},
		{name: "a fresh annotation without held sets the room",
			node:  func() node { return newNode("n1").setAnnotation(annKey, annotationValue(2500, 6*gi, recent)) },
			alive: true, wantCPU: "2500", wantMem: fmt.Sprint(6 * gi)},
		{name: "a room above native allocatable is clamped to it",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(5000, 20*gi, 0, 0, recent)) },
			alive: true, wantCPU: "3800", wantMem: fmt.Sprint(15 * gi), clampedCPU: 1, clampedMem: 1},
		{name: "held above native allocatable is clamped too, with a dead publisher",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(0, 0, 9000, gi, recent)) },
			alive: false, wantCPU: "3800", wantMem: fmt.Sprint(gi), clampedCPU: 1},
		{name: "a value exactly at native allocatable is not clamped",
			node:  func() node { return newNode("n1").setAnnotation(annKey, heldAnnotation(3800, 15*gi, 0, 0, recent)) },
			alive: true, wantCPU: "3800", wantMem: fmt.Sprint(15 * gi)},
		{name: "an unparsable native allocatable bounds at zero",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, heldAnnotation(5000, gi, 0, 0, recent)).setStatus("allocatable", "cpu", "lots")
			},
			alive: true, wantCPU: "0", wantMem: fmt.Sprint(gi), clampedCPU: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, func(time.Time) bool { return c.alive })
			obj := c.node().json(t)
			a := post(t, th, reviewSpec{uid: "abc-123", object: obj, oldObject: obj}.json(t))
			if a.code != http.StatusOK || !a.allowed || a.patch == nil {
				t.Fatalf("answer = %+v, want 200 allowed with a patch", a)
			}
			got := decodeNode(t, apply(t, obj, a.patch))
			for _, m := range []map[string]string{got.Status.Capacity, got.Status.Allocatable} {
				if m[cpuKey] != c.wantCPU || m[memKey] != c.wantMem {
					t.Errorf("got cpu=%q memory=%q, want %q and %q", m[cpuKey], m[memKey], c.wantCPU, c.wantMem)
				}
			}
			if got := testutil.ToFloat64(th.metrics.clamped.WithLabelValues(ResourceCPU)); got != c.clampedCPU {
				t.Errorf("clamped{cpu} = %v, want %v", got, c.clampedCPU)
			}
			if got := testutil.ToFloat64(th.metrics.clamped.WithLabelValues(ResourceMemory)); got != c.clampedMem {
				t.Errorf("clamped{memory} = %v, want %v", got, c.clampedMem)
			}
		})
	}
}

// A heartbeat whose status already carries what was held needs no patch
// while the annotation is stale: the floor does not make kubelet's
// heartbeats churn.
func TestStatusAtWhatWasHeldNeedsNoPatchWhileStale(t *testing.T) {
	th := newTestHandler(t, testNames, func(time.Time) bool { return false })
	obj := newNode("n1").setAnnotation(annKey, heldAnnotation(2500, 1<<30, 1000, 1<<20, testNow.Add(-time.Minute))).
		setStatus("capacity", cpuKey, "1000").setStatus("capacity", memKey, "1Mi").
		setStatus("allocatable", cpuKey, "1k").setStatus("allocatable", memKey, "1048576").json(t)
	a := post(t, th, reviewSpec{uid: "abc-123", object: obj, oldObject: obj}.json(t))
	if a.code != http.StatusOK || !a.allowed || a.patch != nil {
		t.Fatalf("answer = %+v (patch %s), want allowed without a patch", a, a.patch)
	}
	if got := testutil.ToFloat64(th.metrics.stale.WithLabelValues(reclaimable.ReasonPublisherDown)); got != 1 {
		t.Errorf("stale injections{publisher-lease-expired} = %v, want 1", got)
	}
}

// The bound is min(allocatable, capacity) of the incoming object, a missing
// value counting as 0: a writer cannot raise the room by inflating one of
// the two or by leaving one out.
func TestClampIsTheSmallerOfAllocatableAndCapacityWithMissingAsZero(t *testing.T) {
	const gi = int64(1 << 30)
	room := heldAnnotation(3000, 12*gi, 0, 0, testNow.Add(-time.Minute))
	cases := []struct {
		name                   string
		change                 func(n node)
		wantCPU, wantMem       int64
		clampedCPU, clampedMem float64
	}{
		{name: "both above the room: not clamped (control)", change: func(node) {}, wantCPU: 3000, wantMem: 12 * gi},
		{name: "allocatable inflated above capacity: capacity bounds",
			change: func(n node) {
				n.setStatus("allocatable", "cpu", "64").setStatus("allocatable", "memory", "1Ti").
					setStatus("capacity", "cpu", "2").setStatus("capacity", "memory", "8Gi")
			},
			wantCPU: 2000, wantMem: 8 * gi, clampedCPU: 1, clampedMem: 1},
		{name: "capacity inflated above allocatable: allocatable bounds",
			change: func(n node) {
				n.setStatus("capacity", "cpu", "64").setStatus("allocatable", "cpu", "2500m")
			},
			wantCPU: 2500, wantMem: 12 * gi, clampedCPU: 1},
		{name: "allocatable cpu missing: zero",
			change:  func(n node) { delete(n.status()["allocatable"].(map[string]any), "cpu") },
			wantCPU: 0, wantMem: 12 * gi, clampedCPU: 1},
		{name: "capacity memory missing: zero",
			change:  func(n node) { delete(n.status()["capacity"].(map[string]any), "memory") },
			wantCPU: 3000, wantMem: 0, clampedMem: 1},
		{name: "negative allocatable: zero",
			change:  func(n node) { n.setStatus("allocatable", "memory", "-1Gi") },
			wantCPU: 3000, wantMem: 0, clampedMem: 1},
		{name: "no status at all: zero",
			change:  func(n node) { delete(n, "status") },
			wantCPU: 0, wantMem: 0, clampedCPU: 1, clampedMem: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			n := newNode("n1").setAnnotation(annKey, room)
			n.setStatus("capacity", "memory", "16Gi").setStatus("allocatable", "memory", "15Gi")
			c.change(n)
			obj := n.json(t)
			a := post(t, th, reviewSpec{object: obj, oldObject: obj}.json(t))
			if a.code != http.StatusOK || !a.allowed || a.patch == nil {
				t.Fatalf("answer = %+v, want allowed with a patch", a)
			}
			got := decodeNode(t, apply(t, obj, a.patch))
			for _, m := range []map[string]string{got.Status.Capacity, got.Status.Allocatable} {
				if m[cpuKey] != fmt.Sprint(c.wantCPU) || m[memKey] != fmt.Sprint(c.wantMem) {
					t.Errorf("got cpu=%q memory=%q, want %d and %d", m[cpuKey], m[memKey], c.wantCPU, c.wantMem)
				}
			}
			if got := testutil.ToFloat64(th.metrics.clamped.WithLabelValues(ResourceCPU)); got != c.clampedCPU {
				t.Errorf("clamped{cpu} = %v, want %v", got, c.clampedCPU)
			}
			if got := testutil.ToFloat64(th.metrics.clamped.WithLabelValues(ResourceMemory)); got != c.clampedMem {
				t.Errorf("clamped{memory} = %v, want %v", got, c.clampedMem)
			}
		})
	}
}
