package policy

import (
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestDecide(t *testing.T) {
	const refresh = 5 * time.Minute
	gate := Gate{ChangeThreshold: 0.1, DecreaseThreshold: 0.01, Refresh: refresh}
	vals := func(cpu, mem int64) reclaimable.Resources {
		return reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	status := func(cpu, mem int64) *reclaimable.Resources { v := vals(cpu, mem); return &v }
	// on is a node whose annotation says cpu/mem, written ago, with the
	// status carrying the same values and nothing held.
	on := func(cpu, mem int64, ago time.Duration) Observed {
		return Observed{Published: &Published{Room: vals(cpu, mem), WriteTime: now.Add(-ago)}, Status: status(cpu, mem)}
	}
	with := func(o Observed, f func(*Observed)) Observed { f(&o); return o }
	// holding is o with reclaimed pods holding cpu/mem, as its annotation
	// already says, and a status at the floor.
	holding := func(o Observed, cpu, mem int64) Observed {
		o.Held, o.Published.Held = vals(cpu, mem), vals(cpu, mem)
		o.Status = status(max(o.Published.Room.CPUMilli, cpu), max(o.Published.Room.MemoryBytes, mem))
		return o
	}
	gateWith := func(f func(*Gate)) Gate { g := gate; f(&g); return g }
	// The helpers build decisions for nodes where nothing is held, whose
	// status value is the room; heldBy adds what is held and the floor.
	annotationAndStatus := func(reason string, v reclaimable.Resources) Decision {
		return Decision{WriteAnnotation: true, WriteStatus: true, Room: v, Floor: v, Reason: reason}
	}
	annotationOnly := func(reason string, v reclaimable.Resources) Decision {
		return Decision{WriteAnnotation: true, Room: v, Floor: v, Reason: reason}
	}
	statusOnly := func(reason string, v reclaimable.Resources) Decision {
		return Decision{WriteStatus: true, Room: v, Floor: v, Reason: reason}
	}
	nothing := func(reason string, v reclaimable.Resources) Decision {
		return Decision{Room: v, Floor: v, Reason: reason}
	}
	heldBy := func(d Decision, held reclaimable.Resources) Decision {
		d.Held, d.Floor = held, d.Room.Max(held)
		return d
	}

	cases := []struct {
		name     string
		obs      Observed
		computed reclaimable.Resources
		gate     Gate
		want     Decision
	}{
		// First publish.
		{"a node without annotation gets its first annotation and status",
			Observed{}, vals(1000, 2000), gate, annotationAndStatus(PublishInitial, vals(1000, 2000))},
		{"a first publish of zero is still written",
			Observed{}, vals(0, 0), gate, annotationAndStatus(PublishInitial, vals(0, 0))},
		{"a first publish skips a status that already carries the values",
			Observed{Status: status(1000, 2000)}, vals(1000, 2000), gate, annotationOnly(PublishInitial, vals(1000, 2000))},

		// Steady state and the status.
		{"unchanged values with a current status write nothing",
			on(1000, 2000, time.Minute), vals(1000, 2000), gate, nothing(HoldUnchanged, vals(1000, 2000))},
		{"a status without the reclaimed resources is rewritten alone",
			with(on(1000, 2000, time.Minute), func(o *Observed) { o.Status = nil }), vals(1000, 2000), gate,
			statusOnly(PublishStatusMismatch, vals(1000, 2000))},
		{"a status zeroed by kubelet is rewritten with the annotation's values",
			with(on(1000, 2000, time.Minute), func(o *Observed) { o.Status = status(0, 0) }), vals(1000, 2000), gate,
			statusOnly(PublishStatusMismatch, vals(1000, 2000))},

		// Increases.
		{"an increase just above the change threshold is published",
			on(1000, 2000, time.Minute), vals(1101, 2000), gate, annotationAndStatus(PublishChanged, vals(1101, 2000))},
		{"a memory increase above the change threshold is published",
			on(1000, 2000, time.Minute), vals(1000, 2201), gate, annotationAndStatus(PublishChanged, vals(1000, 2201))},
		{"an increase of exactly the change threshold waits and keeps the published values",
			on(1000, 2000, time.Minute), vals(1100, 2200), gate, nothing(HoldSmallIncrease, vals(1000, 2000))},
		{"a small increase with a wrong status rewrites the status with the published values",
			with(on(1000, 2000, time.Minute), func(o *Observed) { o.Status = nil }), vals(1050, 2000), gate,
			statusOnly(PublishStatusMismatch, vals(1000, 2000))},
		{"an increase from zero is published",
			on(0, 2000, time.Minute), vals(1, 2000), gate, annotationAndStatus(PublishChanged, vals(1, 2000))},
		{"a zero change threshold publishes any increase",
			on(1000, 2000, time.Minute), vals(1001, 2000), gateWith(func(g *Gate) { g.ChangeThreshold = 0 }),
			annotationAndStatus(PublishChanged, vals(1001, 2000))},
		{"a change threshold above 100 percent needs more than doubling",
			on(1000, 2000, time.Minute), vals(2000, 2000), gateWith(func(g *Gate) { g.ChangeThreshold = 1.5 }),
			nothing(HoldSmallIncrease, vals(1000, 2000))},
		{"a huge memory increase just above the threshold is compared without overflow",
			on(1000, 1<<40, time.Minute), vals(1000, (1<<40)+(1<<40)/10+1), gate,
			annotationAndStatus(PublishChanged, vals(1000, (1<<40)+(1<<40)/10+1))},
		{"a huge memory increase at the threshold is compared without rounding",
			on(1000, 10<<40, time.Minute), vals(1000, (10<<40)+(1<<40)), gate, nothing(HoldSmallIncrease, vals(1000, 10<<40))},

		// Decreases.
		{"a decrease at the decrease threshold is published",
			on(10000, 1000, time.Minute), vals(9900, 1000), gate, annotationAndStatus(PublishDecreased, vals(9900, 1000))},
		{"a decrease below the decrease threshold is noise and keeps the published values",
			on(10000, 1000, time.Minute), vals(9950, 995), gate, nothing(HoldNoise, vals(10000, 1000))},
		{"a noisy decrease below what reclaimed pods hold is published at once, the status staying at what is held",
			holding(on(10000, 1000, time.Minute), 9990, 0), vals(9950, 1000), gate,
			heldBy(annotationAndStatus(PublishDecreased, vals(9950, 1000)), vals(9990, 0))},
		{"a noisy decrease that still covers exactly what is held waits",
			holding(on(10000, 1000, time.Minute), 9950, 0), vals(9950, 1000), gate,
			heldBy(nothing(HoldNoise, vals(10000, 1000)), vals(9950, 0))},
		{"a zero decrease threshold publishes a decrease of one byte",
			on(10000, 1000, time.Minute), vals(10000, 999), gateWith(func(g *Gate) { g.DecreaseThreshold = 0 }),
			annotationAndStatus(PublishDecreased, vals(10000, 999))},
		{"a decrease to zero is published",
			on(10000, 1000, time.Minute), vals(0, 0), gate, annotationAndStatus(PublishDecreased, vals(0, 0))},
		{"a decrease wins over a large increase of the other resource",
			on(10000, 1000, time.Minute), vals(50000, 500), gate, annotationAndStatus(PublishDecreased, vals(50000, 500))},
		{"a noisy decrease rides along with a change of the other resource at its published value",
			on(10000, 1000, time.Minute), vals(20000, 995), gate, annotationAndStatus(PublishChanged, vals(20000, 1000))},
		{"a decrease whose status is already written only rewrites the annotation",
			with(on(10000, 1000, time.Minute), func(o *Observed) { o.Status = status(5000, 1000) }), vals(5000, 1000), gate,
			annotationOnly(PublishDecreased, vals(5000, 1000))},

		// Refresh.
		{"a write exactly as old as the refresh interval is not refreshed",
			on(1000, 2000, refresh), vals(1000, 2000), gate, nothing(HoldUnchanged, vals(1000, 2000))},
		{"a write older than the refresh interval is refreshed",
			on(1000, 2000, refresh+time.Second), vals(1000, 2000), gate, annotationOnly(PublishRefresh, vals(1000, 2000))},
		{"an old write of zero values is refreshed",
			on(0, 0, time.Hour), vals(0, 0), gate, annotationOnly(PublishRefresh, vals(0, 0))},
		{"a refresh publishes a small increase at its true value",
			on(1000, 2000, time.Hour), vals(1050, 2000), gate, annotationAndStatus(PublishRefresh, vals(1050, 2000))},
		{"a refresh publishes a noisy decrease at its true value, as a refresh",
			on(10000, 1000, time.Hour), vals(9950, 995), gate, annotationAndStatus(PublishRefresh, vals(9950, 995))},
		{"a refresh that carries a decrease beyond the threshold is a decrease",
			on(10000, 1000, time.Hour), vals(9950, 980), gate, annotationAndStatus(PublishDecreased, vals(9950, 980))},
		{"a write slightly in the future is not refreshed",
			on(1000, 2000, -time.Minute), vals(1000, 2000), gate, nothing(HoldUnchanged, vals(1000, 2000))},
		{"a write far in the future is refreshed with the true value",
			on(10000, 1000, -refresh-time.Second), vals(9950, 1000), gate, annotationAndStatus(PublishRefresh, vals(9950, 1000))},

		// The floor: two numbers per node.
		{"stale metrics with held pods drop the room to zero but keep the status at what is held",
			holding(on(6000, 8<<30, time.Minute), 4000, 2<<30), vals(0, 0), gate,
			Decision{WriteAnnotation: true, WriteStatus: true, Room: vals(0, 0), Held: vals(4000, 2<<30),
				Floor: vals(4000, 2<<30), Reason: PublishDecreased}},
		{"still stale with the same pods held writes nothing",
			holding(on(0, 0, time.Minute), 4000, 2<<30), vals(0, 0), gate,
			heldBy(nothing(HoldUnchanged, vals(0, 0)), vals(4000, 2<<30))},
		{"a pod finishing while stale lowers the held and the floor with it",
			with(holding(on(0, 0, time.Minute), 4000, 2<<30), func(o *Observed) { o.Held = vals(1000, 1<<30) }), vals(0, 0), gate,
			Decision{WriteAnnotation: true, WriteStatus: true, Room: vals(0, 0), Held: vals(1000, 1<<30),
				Floor: vals(1000, 1<<30), Reason: PublishHeldChanged}},
		{"the last pod finishing while stale takes the floor to zero",
			with(holding(on(0, 0, time.Minute), 4000, 2<<30), func(o *Observed) { o.Held = vals(0, 0) }), vals(0, 0), gate,
			annotationAndStatus(PublishHeldChanged, vals(0, 0))},
		{"a held change under the room rewrites the annotation only, the floor being the room",
			with(holding(on(6000, 8<<30, time.Minute), 1000, 1<<30), func(o *Observed) { o.Held = vals(2000, 1<<30) }), vals(6000, 8<<30), gate,
			heldBy(annotationOnly(PublishHeldChanged, vals(6000, 8<<30)), vals(2000, 1<<30))},
		{"a held change keeps the room published when its own change is held back",
			with(holding(on(6000, 8<<30, time.Minute), 1000, 1<<30), func(o *Observed) { o.Held = vals(2000, 1<<30) }), vals(6100, 8<<30), gate,
			heldBy(annotationOnly(PublishHeldChanged, vals(6000, 8<<30)), vals(2000, 1<<30))},
		{"held above the room after a usage spike sets the status to what is held",
			holding(on(6000, 8<<30, time.Minute), 4000, 1<<30), vals(1000, 8<<30), gate,
			Decision{WriteAnnotation: true, WriteStatus: true, Room: vals(1000, 8<<30), Held: vals(4000, 1<<30),
				Floor: vals(4000, 8<<30), Reason: PublishDecreased}},
		{"an annotation written before held existed is rewritten once pods hold something",
			with(on(6000, 8<<30, time.Minute), func(o *Observed) { o.Held = vals(4000, 0) }), vals(6000, 8<<30), gate,
			heldBy(annotationOnly(PublishHeldChanged, vals(6000, 8<<30)), vals(4000, 0))},
		{"a node without annotation whose pods hold more than the room gets a status at what is held",
			Observed{Held: vals(4000, 2<<30)}, vals(0, 0), gate,
			Decision{WriteAnnotation: true, WriteStatus: true, Room: vals(0, 0), Held: vals(4000, 2<<30),
				Floor: vals(4000, 2<<30), Reason: PublishInitial}},
		{"a publisher back after a long absence rewrites the room and keeps the status at what is held",
			holding(on(6000, 8<<30, time.Hour), 4000, 2<<30), vals(0, 0), gate,
			Decision{WriteAnnotation: true, WriteStatus: true, Room: vals(0, 0), Held: vals(4000, 2<<30),
				Floor: vals(4000, 2<<30), Reason: PublishDecreased}},
		{"a status zeroed by kubelet while pods hold more than the room is rewritten at the floor",
			with(holding(on(0, 0, time.Minute), 4000, 2<<30), func(o *Observed) { o.Status = status(0, 0) }), vals(0, 0), gate,
			Decision{WriteStatus: true, Room: vals(0, 0), Held: vals(4000, 2<<30), Floor: vals(4000, 2<<30), Reason: PublishStatusMismatch}},
		{"a status at the room instead of the floor is rewritten",
			with(holding(on(1000, 8<<30, time.Minute), 4000, 0), func(o *Observed) { o.Status = status(1000, 8<<30) }), vals(1000, 8<<30), gate,
			Decision{WriteStatus: true, Room: vals(1000, 8<<30), Held: vals(4000, 0), Floor: vals(4000, 8<<30), Reason: PublishStatusMismatch}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.obs, tc.computed, now, tc.gate)
			if got != tc.want {
				t.Errorf("Decide = %+v\n          want %+v", got, tc.want)
			}
			if got.Writes() != (tc.want.WriteAnnotation || tc.want.WriteStatus) {
				t.Errorf("Writes() = %v for %+v", got.Writes(), got)
			}
		})
	}
}
