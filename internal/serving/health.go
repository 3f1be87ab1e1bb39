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
	"github.com/sirupsen/logrus"
)

// Check is a named readiness or liveness check; nil error means it passes.
// It must not block: the kubelet gives a probe one second by default.
type Check func() error

// Health serves /healthz and /readyz on a plain port, and the registry's
// metrics on an authenticated one (see SecureMetrics).
//
// The two probes mean different things. /readyz fails while the role cannot
// serve yet (caches not synced, no certificate): the kubelet keeps the pod
// out of its Service. /healthz fails when the process no longer makes
// progress and only a restart can help (a cycle stuck, an informer stopped
// or unable to list and watch for minutes, a leader that stopped renewing
// its Lease): the kubelet restarts the container.
type Health struct {
	mu    sync.RWMutex
	ready map[string]Check
	live  map[string]Check
	reg   *prometheus.Registry
}

// NewHealth returns a health endpoint set whose metrics server serves reg;
// reg gets the Go and process collectors.
func NewHealth(reg *prometheus.Registry) *Health {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Health{ready: map[string]Check{}, live: map[string]Check{}, reg: reg}
}

// AddReadyCheck adds a check to /readyz.
func (h *Health) AddReadyCheck(name string, c Check) { h.add(h.ready, name, c) }

// AddLiveCheck adds a check to /healthz. A failing one gets the container
// restarted, so it must fail only when the process is stuck for good, never
// while it waits on something a restart would wait on too.
func (h *Health) AddLiveCheck(name string, c Check) { h.add(h.live, name, c) }

func (h *Health) add(checks map[string]Check, name string, c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	checks[name] = c
}

// Ready runs every readiness check and returns the failures, sorted by name.
func (h *Health) Ready() []string { return h.run(h.ready) }

// Live runs every liveness check and returns the failures, sorted by name.
func (h *Health) Live() []string { return h.run(h.live) }

func (h *Health) run(checks map[string]Check) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var failed []string
	for name, c := range checks {
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
		if failed := h.Live(); len(failed) > 0 {
			// The kubelet's event says only that the probe failed: the log
			// says why the container is about to be restarted.
			logrus.WithField("failed", failed).Error("liveness check failing; the kubelet restarts the container once its probe gives up")
			http.Error(w, "not live:\n"+strings.Join(failed, "\n"), http.StatusServiceUnavailable)
			return
		}
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
