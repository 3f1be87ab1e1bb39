package serving_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
)

// A liveness check fails /healthz only, a readiness check /readyz only: a
// role still syncing must not be restarted, and a stuck one must be even if
// it looks ready.
func TestEachProbeAnswersByItsOwnChecks(t *testing.T) {
	var liveErr, readyErr atomic.Pointer[error]
	check := func(p *atomic.Pointer[error]) serving.Check {
		return func() error {
			if err := p.Load(); err != nil {
				return *err
			}
			return nil
		}
	}
	h := serving.NewHealth(prometheus.NewRegistry())
	h.AddLiveCheck("cycle", check(&liveErr))
	h.AddLiveCheck("informers", func() error { return nil })
	h.AddReadyCheck("synced", check(&readyErr))
	e := serving.Endpoints{HealthAddress: servingtest.FreeAddr(t)}
	serve(t, h, e)
	stuck, syncing := errors.New("no cycle for 2m"), errors.New("not synced")
	for _, tc := range []struct {
		name              string
		live, ready       error
		wantLive, wantRdy int
		wantBody          map[string]string
	}{
		{name: "both pass", wantLive: http.StatusOK, wantRdy: http.StatusOK},
		{name: "not live", live: stuck, wantLive: http.StatusServiceUnavailable, wantRdy: http.StatusOK,
			wantBody: map[string]string{"/healthz": "cycle: no cycle for 2m"}},
		{name: "not ready", ready: syncing, wantLive: http.StatusOK, wantRdy: http.StatusServiceUnavailable,
			wantBody: map[string]string{"/readyz": "synced: not synced"}},
		{name: "neither", live: stuck, ready: syncing, wantLive: http.StatusServiceUnavailable, wantRdy: http.StatusServiceUnavailable,
			wantBody: map[string]string{"/healthz": "cycle: no cycle for 2m", "/readyz": "synced: not synced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			liveErr.Store(nil)
			readyErr.Store(nil)
			if tc.live != nil {
				liveErr.Store(&tc.live)
			}
			if tc.ready != nil {
				readyErr.Store(&tc.ready)
			}
			for path, want := range map[string]int{"/healthz": tc.wantLive, "/readyz": tc.wantRdy} {
				code, body := get(t, "http://"+e.HealthAddress+path, "")
				if code != want {
					t.Errorf("%s: %d %q, want %d", path, code, body, want)
				}
				if w := tc.wantBody[path]; w != "" && !strings.Contains(body, w) {
					t.Errorf("%s: body %q lacks %q", path, body, w)
				}
				if code == http.StatusOK && body != "ok\n" {
					t.Errorf("%s: body %q, want ok", path, body)
				}
			}
		})
	}
	// The last case left the cycle check failing; the passing one is not listed.
	if got := h.Live(); len(got) != 1 || got[0] != "cycle: no cycle for 2m" {
		t.Errorf("Live() = %q, want only the failing check", got)
	}
}
