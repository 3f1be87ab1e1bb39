// Package serving holds the HTTP plumbing every role shares: the health and
// metrics server, graceful shutdown, request instrumentation and TLS
// certificates reloaded from disk.
package serving

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is a named readiness check; nil error means ready.
type Check func() error

// Health serves /healthz, /readyz and /metrics.
type Health struct {
	mu     sync.RWMutex
	checks map[string]Check
	reg    *prometheus.Registry
}

// NewHealth returns a health endpoint set whose /metrics serves reg; reg gets
// the Go and process collectors.
func NewHealth(reg *prometheus.Registry) *Health {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Health{checks: map[string]Check{}, reg: reg}
}

// AddReadyCheck adds a check to /readyz.
func (h *Health) AddReadyCheck(name string, c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = c
}

// Ready runs every check and returns the failures, sorted by name.
func (h *Health) Ready() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var failed []string
	for name, c := range h.checks {
		if err := c(); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
		}
	}
	sort.Strings(failed)
	return failed
}

// Register adds the endpoints to r.
func (h *Health) Register(r *mux.Router) {
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if failed := h.Ready(); len(failed) > 0 {
			http.Error(w, "not ready:\n"+strings.Join(failed, "\n"), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet)
	r.Handle("/metrics", promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{Registry: h.reg}))
}

// Serve runs the health server on addr until ctx ends.
func (h *Health) Serve(ctx context.Context, addr string) error {
	r := mux.NewRouter()
	h.Register(r)
	return ListenAndServe(ctx, NewServer(addr, r), nil)
}
