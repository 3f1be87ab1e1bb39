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
		cache: placement.NewMetrics(sub),
	}
	for id := placement.RNone + 1; id < placement.NReasons; id++ {
		m.filtered[id] = filtered.WithLabelValues(placement.ReasonLabels[id])
	}
	reg.MustRegister(filtered, m.conflicts)
	reg.MustRegister(m.cache.Collectors()...)
	return m
}
