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
		return Observed{Published: &Published{Values: vals(cpu, mem), WriteTime: now.Add(-ago)}, Status: status(cpu, mem)}
	}
	with := func(o Observed, f func(*Observed)) Observed { f(&o); return o }
	gateWith := func(f func(*Gate)) Gate { g := gate; f(&g); return g }
	annotationAndStatus := func(reason string, v reclaimable.Resources) Decision {
		return Decision{WriteAnnotation: true, WriteStatus: true, Values: v, Reason: reason}
	}
	annotationOnly := func(reason string, v reclaimable.Resources) Decision {
		return Decision{WriteAnnotation: true, Values: v, Reason: reason}
	}
	nothing := func(reason string, v reclaimable.Resources) Decision { return Decision{Values: v, Reason: reason} }

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
			Decision{WriteStatus: true, Values: vals(1000, 2000), Reason: PublishStatusMismatch}},
		{"a status zeroed by kubelet is rewritten with the annotation's values",
			with(on(1000, 2000, time.Minute), func(o *Observed) { o.Status = status(0, 0) }), vals(1000, 2000), gate,
			Decision{WriteStatus: true, Values: vals(1000, 2000), Reason: PublishStatusMismatch}},

		// Increases.
		{"an increase just above the change threshold is published",
			on(1000, 2000, time.Minute), vals(1101, 2000), gate, annotationAndStatus(PublishChanged, vals(1101, 2000))},
		{"a memory increase above the change threshold is published",
			on(1000, 2000, time.Minute), vals(1000, 2201), gate, annotationAndStatus(PublishChanged, vals(1000, 2201))},
		{"an increase of exactly the change threshold waits and keeps the published values",
			on(1000, 2000, time.Minute), vals(1100, 2200), gate, nothing(HoldSmallIncrease, vals(1000, 2000))},
		{"a small increase with a wrong status rewrites the status with the published values",
			with(on(1000, 2000, time.Minute), func(o *Observed) { o.Status = nil }), vals(1050, 2000), gate,
			Decision{WriteStatus: true, Values: vals(1000, 2000), Reason: PublishStatusMismatch}},
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
		{"a noisy decrease below what reclaimed pods hold is published at once",
			with(on(10000, 1000, time.Minute), func(o *Observed) { o.Held = vals(9990, 0) }), vals(9950, 1000), gate,
			annotationAndStatus(PublishDecreased, vals(9950, 1000))},
		{"a noisy decrease that still covers exactly what is held waits",
			with(on(10000, 1000, time.Minute), func(o *Observed) { o.Held = vals(9950, 0) }), vals(9950, 1000), gate,
			nothing(HoldNoise, vals(10000, 1000))},
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
		{"a refresh publishes a noisy decrease at its true value",
			on(10000, 1000, time.Hour), vals(9950, 995), gate, annotationAndStatus(PublishDecreased, vals(9950, 995))},
		{"a write slightly in the future is not refreshed",
			on(1000, 2000, -time.Minute), vals(1000, 2000), gate, nothing(HoldUnchanged, vals(1000, 2000))},
		{"a write far in the future is refreshed with the true value",
			on(10000, 1000, -refresh-time.Second), vals(9950, 1000), gate, annotationAndStatus(PublishDecreased, vals(9950, 1000))},
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
