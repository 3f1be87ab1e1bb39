package plugin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/placement"
)

type metrics struct {
	// filtered is by placement.ReasonID, every label pre-created.
	filtered  [placement.NReasons]prometheus.Counter
	conflicts *prometheus.CounterVec
	cache     *placement.Metrics
}

// newMetrics registers the plugin's metrics on reg, beside the scheduler's
// own (kube-scheduler serves its legacy registry on /metrics).
func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "kube_reclaim", "scheduler_plugin"
	filtered := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "filtered_nodes_total",
		Help: "Nodes failed by the plugin's Filter (and pods refused by its PreFilter), by reason, with the extender's reason labels."},
		[]string{"reason"})
	m := &metrics{
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reserve_conflicts_total",
			Help: "Reserve calls refused because the room was gone, by reason."}, []string{"reason"}),
		cache: &placement.Metrics{
			ClampedNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
				Name: "clamped_nodes",
				Help: "Nodes whose reclaimable annotation exceeds their native allocatable, by resource; scheduled against allocatable."},
				[]string{"resource"}),
			AssumptionsExpired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
				Name: "assumptions_expired_total",
				Help: "Reservations that expired before the pod informer showed the pod bound."}),
			AssumptionConfirmed: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
				Name:    "assumption_confirm_duration_seconds",
				Help:    "Time from Reserve to the pod informer showing the pod bound (or deleted).",
				Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		},
	}
	for id := placement.RNone + 1; id < placement.NReasons; id++ {
		m.filtered[id] = filtered.WithLabelValues(placement.ReasonLabels[id])
	}
	for _, r := range []string{placement.ClampCPU, placement.ClampMemory} {
		m.cache.ClampedNodes.WithLabelValues(r)
	}
	reg.MustRegister(filtered, m.conflicts, m.cache.ClampedNodes, m.cache.AssumptionsExpired, m.cache.AssumptionConfirmed.(prometheus.Histogram))
	return m
}
