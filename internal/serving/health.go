// Package serving holds the HTTP plumbing every role shares: the plain probe
// server, the authenticated metrics server, graceful shutdown, request
// instrumentation and TLS certificates reloaded from disk.
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
)

// Check is a named readiness check; nil error means ready.
type Check func() error

// Health serves /healthz and /readyz on a plain port, and the registry's
// metrics on an authenticated one (see SecureMetrics).
type Health struct {
	mu     sync.RWMutex
	checks map[string]Check
	reg    *prometheus.Registry
}

// NewHealth returns a health endpoint set whose metrics server serves reg;
// reg gets the Go and process collectors.
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

// Register adds the probe endpoints to r. Metrics are not among them: the
// probe port is plain HTTP that any pod can reach, and metrics tell per-node
// room.
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
}

// Endpoints says where a role serves its probes and its metrics.
type Endpoints struct {
	// HealthAddress serves /healthz and /readyz over plain HTTP.
	HealthAddress string
	// Metrics serves /metrics over HTTPS to authorized callers; its Address
	// empty turns it off.
	Metrics SecureMetrics
}

// Serve runs the probe server and, unless turned off, the metrics server
// until ctx ends or one of them fails; a failure stops the other too.
func (h *Health) Serve(ctx context.Context, e Endpoints) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := mux.NewRouter()
	h.Register(r)
	if e.Metrics.Address == "" {
		return ListenAndServe(ctx, NewServer(e.HealthAddress, r), nil)
	}
	metrics, tlsConfig, err := h.metricsServer(ctx, e.Metrics)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- wrapErr("health server", ListenAndServe(ctx, NewServer(e.HealthAddress, r), nil)) }()
	go func() { errc <- wrapErr("metrics server", ListenAndServe(ctx, metrics, tlsConfig)) }()
	first := <-errc
	cancel()
	if second := <-errc; first == nil {
		first = second
	}
	return first
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
