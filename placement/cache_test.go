package placement

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func req(cpu, mem int64) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
}

func testMetrics() *Metrics {
	return &Metrics{
		ClampedNodes:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "clamped"}, []string{"resource"}),
		AssumptionsExpired:  prometheus.NewCounter(prometheus.CounterOpts{Name: "expired"}),
		AssumptionConfirmed: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "confirmed"}),
	}
}

// The cached verdict must always equal what reclaimable.Judge says right now
// (its values clamped to the node's allocatable), whatever the order of
// instants and lease flips it is asked at.
func TestCachedVerdictAgreesWithJudge(t *testing.T) {
	const staleAfter = 10 * time.Minute
	written := t0
	a := reclaimable.Annotation{CPUMilli: 1000, MemoryBytes: gi, Policy: "usage", WriteTime: written}
	value, _ := a.Marshal()
	entries := map[string]*Entry{
		"fresh-annotation":  {annotation: value, present: true, allocatable: req(4000, 4*gi)},
		"above-allocatable": {annotation: value, present: true, allocatable: req(500, 2*gi)},
		"missing":           {},
		"malformed":         {annotation: "{", present: true},
	}
	// Instants around every boundary of Judge, visited in random order.
	var instants []time.Time
	for _, base := range []time.Time{written.Add(-staleAfter), written, written.Add(staleAfter)} {
		for _, d := range []time.Duration{-time.Hour, -time.Second, -1, 0, 1, time.Second, time.Hour} {
			instants = append(instants, base.Add(d))
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for name, e := range entries {
		for range 2000 {
			now := instants[rng.IntN(len(instants))]
			alive := rng.IntN(4) != 0
			got := e.judge(now, now.UnixNano(), alive, staleAfter)
			want := reclaimable.Judge(e.annotation, e.present, now, staleAfter, alive)
			want.Room = clampTo(want.Room, e.allocatable)
			if got.Fresh != want.Fresh || got.Reason != want.Reason || got.Room != want.Room {
				t.Fatalf("%s at written%+v alive=%v: cached {%v %q %+v}, Judge {%v %q %+v}", name, now.Sub(written), alive,
					got.Fresh, got.Reason, got.Room, want.Fresh, want.Reason, want.Room)
			}
		}
	}
}

// Node and pod events in any order leave sums that match a recount.
func TestCacheSumsMatchRecount(t *testing.T) {
	c := NewCache(10*time.Minute, 30*time.Second, time.Second, nil, testMetrics())
	c.now = func() time.Time { return t0 }
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := []string{"a", "b", "c"}
	live := map[string]Pod{} // uid → current record
	for i := range 5000 {
		uid := string(rune('A' + rng.IntN(40)))
		switch rng.IntN(5) {
		case 0:
			if p, ok := live[uid]; ok {
				c.DeletePod(p.UID)
				delete(live, uid)
			}
		case 1:
			c.SetNode(Node{Name: nodes[rng.IntN(3)], Annotation: "x", Present: i%2 == 0})
		default:
			p := Pod{UID: types.UID("uid-" + uid), Req: req(rng.Int64N(3)*100, rng.Int64N(3)*mi),
				Terminal: rng.IntN(6) == 0}
			if rng.IntN(3) > 0 {
				p.NodeName = nodes[rng.IntN(3)]
			}
			c.SetPod(p)
			live[uid] = p
		}
	}
	want := map[string]reclaimable.Resources{}
	for _, p := range live {
		if p.NodeName != "" && !p.Terminal {
			want[p.NodeName] = want[p.NodeName].Add(p.Req)
		}
	}
	for _, n := range nodes {
		var got reclaimable.Resources
		if e := c.nodes[n]; e != nil {
			got = e.used
		}
		if got != want[n] {
			t.Errorf("node %s: used %+v, recount %+v", n, got, want[n])
		}
	}
}
