package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHistogramReadsCountAndSumOfOneChild(t *testing.T) {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"}, []string{"outcome"})
	vec.WithLabelValues("a").Observe(0.5)
	vec.WithLabelValues("a").Observe(2)
	vec.WithLabelValues("b").Observe(7)
	if n, sum := Histogram(t, vec.WithLabelValues("a")); n != 2 || sum != 2.5 {
		t.Errorf("child a: count %d sum %v, want 2 and 2.5", n, sum)
	}
	if n := HistogramCount(t, vec.WithLabelValues("c")); n != 0 {
		t.Errorf("child c: count %d, want 0", n)
	}
	// Positive control: the plain histogram reads the same way.
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "one_seconds", Help: "h"})
	h.Observe(1)
	if n := HistogramCount(t, h); n != 1 {
		t.Errorf("histogram: count %d, want 1", n)
	}
}

func TestGatheredSumsTheMatchingSeriesOfOneMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"route", "code"})
	c.WithLabelValues("filter", "200").Add(2)
	c.WithLabelValues("filter", "500").Add(3)
	c.WithLabelValues("bind", "200").Add(5)
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"}, []string{"route"})
	h.WithLabelValues("filter").Observe(9)
	h.WithLabelValues("filter").Observe(9)
	reg.MustRegister(c, h, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "g", Help: "g"}, func() float64 { return 7 }))
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c_total", map[string]string{"route": "filter", "code": "200"}, 2},
		{"c_total", map[string]string{"route": "filter"}, 5},
		{"c_total", nil, 10},
		{"c_total", map[string]string{"route": "none"}, 0},
		{"h_seconds", map[string]string{"route": "filter"}, 2}, // the count, not the sum
		{"g", nil, 7},
		{"absent", nil, 0},
	} {
		if got := Gathered(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Gathered(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
