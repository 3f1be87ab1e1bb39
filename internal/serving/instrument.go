package serving

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RequestMetrics counts and times every request of a server by route and code.
type RequestMetrics struct {
	duration *prometheus.HistogramVec
}

// NewRequestMetrics registers the request histogram of a server named
// component (for example "webhook") on reg.
func NewRequestMetrics(reg prometheus.Registerer, component string) *RequestMetrics {
	m := &RequestMetrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kube_reclaim",
		Subsystem: component,
		Name:      "http_request_duration_seconds",
		Help:      "Latency of HTTP requests by route and status code.",
		// Sub-millisecond buckets: the request paths are meant to be far below 1 ms.
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route", "code"})}
	reg.MustRegister(m.duration)
	return m
}

// Wrap instruments h under the route label.
func (m *RequestMetrics) Wrap(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.duration.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

// Unwrap lets http.ResponseController reach the connection (the webhook
// sets a read deadline per review).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
