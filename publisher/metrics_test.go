package publisher

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The failure counters the alerts read with increase() are exported at 0
// before the first failure: a series that first appears at 1 has no
// increase, and the first refused policy file or failed write would go
// unseen.
func TestFailureCountersAreExportedAtZeroFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, false)
	for _, c := range []struct {
		name   string
		vec    *prometheus.CounterVec
		labels []string
	}{
		{"kube_reclaim_publisher_write_errors_total", m.writeErrors, []string{writeAnnotation, writeStatus}},
		{"kube_reclaim_publisher_config_reloads_total", m.configReloads, []string{"success", "error"}},
	} {
		// Count through the registry first: reading a child creates it.
		if n, err := testutil.GatherAndCount(reg, c.name); err != nil || n != len(c.labels) {
			t.Errorf("%s has %d series (err %v) before any event, want %d", c.name, n, err, len(c.labels))
		}
		for _, l := range c.labels {
			if got := testutil.ToFloat64(c.vec.WithLabelValues(l)); got != 0 {
				t.Errorf("%s{%s} = %v before any event, want 0", c.name, l, got)
			}
		}
	}
}
