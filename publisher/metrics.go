package publisher

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	cycleDuration prometheus.Histogram
	publishedCPU  *prometheus.GaugeVec
	publishedMem  *prometheus.GaugeVec
	writes        *prometheus.CounterVec
	writeErrors   *prometheus.CounterVec
	// refreshesDeferred counts refreshes left for a later cycle
	// (refreshBudget).
	refreshesDeferred prometheus.Counter
	zeroNodes         *prometheus.GaugeVec
	metricsErrors     prometheus.Counter
	configReloads     *prometheus.CounterVec
	leader            prometheus.Gauge
	nodesEvaluated    prometheus.Gauge
	// Cluster sums of the room every node has published, kept whatever
	// --per-node-metrics says.
	clusterCPU    prometheus.Gauge
	clusterMem    prometheus.Gauge
	nodesWithRoom prometheus.Gauge
	// What reclaimed pods hold, and what regular pods requested and leave
	// unused, per node (--per-node-metrics) and over the cluster; the
	// room, held and unused sums per pool (see setValues).
	heldCPU, heldMem                   *prometheus.GaugeVec
	clusterHeldCPU, clusterHeldMem     prometheus.Gauge
	clusterUnusedCPU, clusterUnusedMem prometheus.Gauge
	pool                               [nPoolGauges]*prometheus.GaugeVec
}

// The kind label of writes_total and write_errors_total: what one write
// carries.
const (
	writeAnnotation = "annotation" // the annotation, with the floor when it changed too
	writeStatus     = "status"     // the floor alone
)

// nPoolGauges: room, held and unused requests, CPU and memory each, in the
// order of poolValues.values.
const nPoolGauges = 6

// newMetrics registers the publisher's metrics; the per-node gauges only
// when perNode is set, so that switching them off removes their series.
func newMetrics(reg prometheus.Registerer, perNode bool) *metrics {
	const ns, sub = "kube_reclaim", "publisher"
	m := &metrics{
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "cycle_duration_seconds", Help: "Duration of one evaluation cycle over every node, writes included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		publishedCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "published_cpu_millicores", Help: "Reclaimable CPU last published per node (the room)."}, []string{"node"}),
		publishedMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "published_memory_bytes", Help: "Reclaimable memory last published per node (the room)."}, []string{"node"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "writes_total", Help: "API writes, one merge patch on nodes/status per publish, by what it carries (annotation: the annotation, with the floor when it changed; status: the floor alone) and reason (initial, decreased, changed, refresh, held-changed, status-mismatch)."},
			[]string{"kind", "reason"}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "write_errors_total", Help: "Node writes that failed after retries, by kind."}, []string{"kind"}),
		refreshesDeferred: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "refreshes_deferred_total", Help: "Refreshes due but left for a later cycle because more were due at once than a cycle writes (twice the steady rate); none waits more than half a refresh interval."}),
		zeroNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "zero_nodes", Help: "Nodes published as zero on purpose in the last cycle, by reason (metrics-stale, no-samples)."}, []string{"reason"}),
		metricsErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "metrics_api_errors_total", Help: "Failed reads of metrics.k8s.io."}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "config_reloads_total", Help: "Policy file reloads by result (success, error)."}, []string{"result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "is_leader", Help: "1 while this replica holds the leader lease."}),
		nodesEvaluated: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "nodes_evaluated", Help: "Nodes evaluated in the last cycle."}),
		clusterCPU: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_published_cpu_millicores", Help: "Sum over every node of the reclaimable CPU published on it (the room), after the last cycle."}),
		clusterMem: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_published_memory_bytes", Help: "Sum over every node of the reclaimable memory published on it (the room), after the last cycle."}),
		nodesWithRoom: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "nodes_with_room", Help: "Nodes whose published room is above zero for both CPU and memory, after the last cycle."}),
		heldCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "held_cpu_millicores", Help: "Reclaimed CPU that the node's batch pods hold (the sum of their reclaimed requests), after the last cycle."}, []string{"node"}),
		heldMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "held_memory_bytes", Help: "Reclaimed memory that the node's batch pods hold (the sum of their reclaimed requests), after the last cycle."}, []string{"node"}),
		clusterHeldCPU: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_held_cpu_millicores", Help: "Sum over every node of the reclaimed CPU its batch pods hold, after the last cycle."}),
		clusterHeldMem: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_held_memory_bytes", Help: "Sum over every node of the reclaimed memory its batch pods hold, after the last cycle."}),
		clusterUnusedCPU: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_unused_requested_cpu_millicores", Help: "CPU that regular pods requested and leave unused, summed over pods: each pod's request minus its newest usage sample, at least zero; a pod without a fresh sample counts as using its request."}),
		clusterUnusedMem: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "cluster_unused_requested_memory_bytes", Help: "Memory that regular pods requested and leave unused, summed over pods: each pod's request minus its newest usage sample, at least zero; a pod without a fresh sample counts as using its request."}),
	}
	for i, g := range []struct{ name, help string }{
		{"pool_published_cpu_millicores", "Reclaimable CPU published on the nodes of the pool (pool=\"\": the default settings), after the last cycle."},
		{"pool_published_memory_bytes", "Reclaimable memory published on the nodes of the pool (pool=\"\": the default settings), after the last cycle."},
		{"pool_held_cpu_millicores", "Reclaimed CPU that batch pods hold on the nodes of the pool, after the last cycle."},
		{"pool_held_memory_bytes", "Reclaimed memory that batch pods hold on the nodes of the pool, after the last cycle."},
		{"pool_unused_requested_cpu_millicores", "CPU that regular pods on the nodes of the pool requested and leave unused (as cluster_unused_requested_cpu_millicores)."},
		{"pool_unused_requested_memory_bytes", "Memory that regular pods on the nodes of the pool requested and leave unused (as cluster_unused_requested_memory_bytes)."},
	} {
		m.pool[i] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: g.name, Help: g.help}, []string{"pool"})
		reg.MustRegister(m.pool[i])
	}
	// The failure series exist from the start at 0, so that an increase over
	// them (the alerts of deploy/components/monitoring) sees the first one.
	for _, kind := range []string{writeAnnotation, writeStatus} {
		m.writeErrors.WithLabelValues(kind)
	}
	for _, result := range []string{"success", "error"} {
		m.configReloads.WithLabelValues(result)
	}
	if perNode {
		reg.MustRegister(m.publishedCPU, m.publishedMem, m.heldCPU, m.heldMem)
	}
	reg.MustRegister(m.cycleDuration, m.writes, m.writeErrors, m.refreshesDeferred, m.zeroNodes,
		m.metricsErrors, m.configReloads, m.leader, m.nodesEvaluated, m.clusterCPU, m.clusterMem, m.nodesWithRoom,
		m.clusterHeldCPU, m.clusterHeldMem, m.clusterUnusedCPU, m.clusterUnusedMem)
	return m
}
