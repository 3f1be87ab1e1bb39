// Package metrictest reads what client_golang's testutil does not: the sample
// count and sum of one histogram (testutil.ToFloat64 reads counters, gauges
// and untyped metrics only, and testutil's comparisons need every bucket,
// which a duration histogram cannot know in advance), and a value a test can
// reach only through the registry (a GaugeFunc or a custom collector
// registered inside a package, a histogram of another package), where
// testutil's comparisons would need the exact value and help text. Use
// testutil wherever the test holds the metric.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Histogram returns the sample count and sum of h, one histogram or one
// child of a HistogramVec.
func Histogram(t testing.TB, h prometheus.Observer) (count uint64, sum float64) {
	t.Helper()
	m, ok := h.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a metric", h)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Histogram == nil {
		t.Fatalf("%s is not a histogram", m.Desc())
	}
	return out.Histogram.GetSampleCount(), out.Histogram.GetSampleSum()
}

// HistogramCount returns how many observations h, one histogram or one child
// of a HistogramVec, holds.
func HistogramCount(t testing.TB, h prometheus.Observer) uint64 {
	t.Helper()
	n, _ := Histogram(t, h)
	return n
}

// Gathered sums, over the series of the metric name in g whose labels
// include labels, the value of each counter, gauge or untyped metric and the
// sample count of each histogram; 0 when none matches.
func Gathered(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			if !includes(have, labels) {
				continue
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() +
				float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func includes(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
