package publisher

import (
	"time"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// unusedRequests is what the regular pods among pods requested and leave
// unused: for each, its request minus its newest usage sample, at least
// zero, so that a pod above its request does not hide another's idle
// request. A pod without a sample newer than staleAfter counts as using all
// it requested, as the usage policy counts a pod it has not measured: the
// figure never claims idle capacity the publisher could not see.
func unusedRequests(pods []policy.Pod, now time.Time, staleAfter time.Duration) reclaimable.Resources {
	var unused reclaimable.Resources
	for i := range pods {
		p := &pods[i]
		if p.Reclaimed {
			continue
		}
		s, ok := p.Series.Newest()
		if !ok || now.Sub(s.Time) > staleAfter {
			continue
		}
		unused.CPUMilli += max(p.Requests.CPUMilli-s.CPUMilli, 0)
		unused.MemoryBytes += max(p.Requests.MemoryBytes-s.MemoryBytes, 0)
	}
	return unused
}

// poolValues is what the nodes of one pool add up to.
type poolValues struct {
	room, held, unused reclaimable.Resources
}

// setValues sets the gauges of the value kube-reclaim brings, from the
// cycle's outcomes: the room, what reclaimed pods hold of it and what
// regular pods requested and leave unused, summed over the cluster and per
// pool; and per node the room (on writes, runWrites) and what is held.
//
// Per node only under --per-node-metrics, which already costs two series a
// node: held adds two more (20,000 series at 5,000 nodes in all), and it is
// what tells which nodes' batch pods hold more than their room. The unused
// requests are summed per pool and cluster only: per node they would add
// another 10,000 series at 5,000 nodes for a figure read as a total. Pools
// are the policy file's few, so their series stay few; the nodes of the
// default settings carry pool="".
func (p *Publisher) setValues(outcomes []outcome) {
	var room, held, unused reclaimable.Resources
	withRoom := 0
	pools := map[string]*poolValues{}
	for i := range outcomes {
		o := &outcomes[i]
		room, held, unused = room.Add(o.room), held.Add(o.held), unused.Add(o.unused)
		if o.room.CPUMilli > 0 && o.room.MemoryBytes > 0 {
			withRoom++
		}
		pv := pools[o.pool]
		if pv == nil {
			pv = &poolValues{}
			pools[o.pool] = pv
		}
		pv.room, pv.held, pv.unused = pv.room.Add(o.room), pv.held.Add(o.held), pv.unused.Add(o.unused)
		// Set on change only: what is held moves with binds and
		// completions, seldom on most nodes, and looking a child up by its
		// label costs more than the comparison.
		if last, ok := p.held[o.node]; p.opts.PerNodeMetrics && (!ok || last != o.held) {
			p.m.heldCPU.WithLabelValues(o.node).Set(float64(o.held.CPUMilli))
			p.m.heldMem.WithLabelValues(o.node).Set(float64(o.held.MemoryBytes))
			p.held[o.node] = o.held
		}
	}
	p.m.clusterCPU.Set(float64(room.CPUMilli))
	p.m.clusterMem.Set(float64(room.MemoryBytes))
	p.m.clusterHeldCPU.Set(float64(held.CPUMilli))
	p.m.clusterHeldMem.Set(float64(held.MemoryBytes))
	p.m.clusterUnusedCPU.Set(float64(unused.CPUMilli))
	p.m.clusterUnusedMem.Set(float64(unused.MemoryBytes))
	p.m.nodesWithRoom.Set(float64(withRoom))

	// A pool renamed or removed by a reload, or left without nodes, drops
	// its series rather than keep its last values.
	for name := range p.pools {
		if pools[name] == nil {
			for _, g := range p.m.pool {
				g.DeleteLabelValues(name)
			}
			delete(p.pools, name)
		}
	}
	for name, v := range pools {
		p.pools[name] = true
		for i, x := range v.values() {
			p.m.pool[i].WithLabelValues(name).Set(float64(x))
		}
	}
}

// values lists the sums in the order of the per-pool gauges (metrics.pool).
func (v *poolValues) values() [nPoolGauges]int64 {
	return [nPoolGauges]int64{v.room.CPUMilli, v.room.MemoryBytes, v.held.CPUMilli, v.held.MemoryBytes,
		v.unused.CPUMilli, v.unused.MemoryBytes}
}
