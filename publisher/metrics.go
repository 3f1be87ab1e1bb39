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
}

// newMetrics registers the publisher's metrics; the per-node gauges only
// when perNode is set, so that switching them off removes their series.
func newMetrics(reg prometheus.Registerer, perNode bool) *metrics {
	const ns, sub = "kube_reclaim", "publisher"
	m := &metrics{
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "cycle_duration_seconds", Help: "Duration of one evaluation cycle over every node, writes included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		publishedCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "published_cpu_millicores", Help: "Reclaimable CPU last published per node."}, []string{"node"}),
		publishedMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "published_memory_bytes", Help: "Reclaimable memory last published per node."}, []string{"node"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "writes_total", Help: "API writes, one merge patch on nodes/status per publish, by what it carries (annotation: the annotation, with the status values when they changed; status: the status values alone) and reason (initial, decreased, changed, refresh, held-changed, status-mismatch)."},
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
	}
	if perNode {
		reg.MustRegister(m.publishedCPU, m.publishedMem)
	}
	reg.MustRegister(m.cycleDuration, m.writes, m.writeErrors, m.refreshesDeferred, m.zeroNodes,
		m.metricsErrors, m.configReloads, m.leader, m.nodesEvaluated, m.clusterCPU, m.clusterMem, m.nodesWithRoom)
	return m
}
