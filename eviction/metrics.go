package eviction

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	evictions   *prometheus.CounterVec
	blocked     prometheus.Counter
	rateLimited prometheus.Counter
	errors      prometheus.Counter
	overRoom    prometheus.Gauge
	// memoryPressure counts the nodes in a memory pressure episode.
	memoryPressure prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "kube_reclaim", "publisher"
	m := &metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "evictions_total", Help: "Reclaimed pods evicted (mode on) or that would have been (dry-run), by mode and reason: the pressure that caused it (memory-pressure: the node's pods used more memory than the pool's eviction.memoryPressure.evictAbove; cpu-starvation: the pod was starved of its CPU grant for the pool's eviction.cpuStarvation.window)."},
			[]string{"mode", "reason"}),
		blocked: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "evictions_blocked_total", Help: "Evictions refused by a PodDisruptionBudget (HTTP 429); retried on a later cycle after a back-off."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "evictions_rate_limited_total", Help: "Evictions put off to a later cycle by the per-node or cluster-wide rate limit."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "eviction_errors_total", Help: "Eviction API calls that failed for another reason than a PodDisruptionBudget."}),
		overRoom: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "nodes_over_room", Help: "Nodes whose reclaimed pods held more than the room in the last cycle, on fresh data: no new reclaimed pod is placed there, and none is evicted for it."}),
		memoryPressure: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "nodes_memory_pressure", Help: "Nodes in memory pressure in the last cycle, on fresh data: their pods' memory rose above eviction.memoryPressure.evictAbove of allocatable for the grace and is not yet back under evictUntilBelow."}),
	}
	reg.MustRegister(m.evictions, m.blocked, m.rateLimited, m.errors, m.overRoom, m.memoryPressure)
	return m
}
