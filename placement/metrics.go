package placement

import "github.com/prometheus/client_golang/prometheus"

// Metrics are what the cache counts (NewMetrics builds them).
type Metrics struct {
	// ClampedNodes is by resource (ClampCPU, ClampMemory).
	ClampedNodes        *prometheus.GaugeVec
	AssumptionsExpired  prometheus.Counter
	AssumptionConfirmed prometheus.Histogram
}

// Resource label values of ClampedNodes.
const (
	ClampCPU    = "cpu"
	ClampMemory = "memory"
)

// NewMetrics returns the cache's metrics, named
// kube_reclaim_<subsystem>_*, every label pre-created and none registered
// yet (Collectors): the extender and the scheduler plugin count the same
// cache under their own subsystem.
func NewMetrics(subsystem string) *Metrics {
	const ns = "kube_reclaim"
	m := &Metrics{
		ClampedNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: subsystem,
			Name: "clamped_nodes",
			Help: "Nodes whose reclaimable annotation exceeds their native allocatable, by resource (cpu, memory); they are scheduled against allocatable. Non-zero means a publisher bug or a hand-edited annotation."},
			[]string{"resource"}),
		AssumptionsExpired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem,
			Name: "assumptions_expired_total",
			Help: "Assumptions (the room of a pod placed here) dropped after the assume timeout without the pod informer showing the pod bound. Non-zero means the watch lags more than the timeout (risk of over-booking) or Bindings were lost."}),
		AssumptionConfirmed: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: subsystem,
			Name:    "assumption_confirm_duration_seconds",
			Help:    "Time from a placement's assumption to the pod informer showing the pod bound (or deleted): Binding call plus watch lag. The assume timeout must stay well above it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	for _, r := range []string{ClampCPU, ClampMemory} {
		m.ClampedNodes.WithLabelValues(r)
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ClampedNodes, m.AssumptionsExpired, m.AssumptionConfirmed}
}
