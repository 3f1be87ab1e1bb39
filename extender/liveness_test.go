package extender

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
)

func getHealthz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The extender's /healthz passes while its informers run and fails, naming
// each, once they stopped: its verbs would answer from a cache that no
// longer changes.
func TestHealthzFailsOnceTheInformersStopped(t *testing.T) {
	f := newFixture(t, fixtureOpts{noStart: true})
	h := serving.NewHealth(prometheus.NewRegistry())
	f.ext.registerHealth(h)
	r := mux.NewRouter()
	h.Register(r)
	srv := httptest.NewServer(r)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	f.ext.start(ctx, &wg)
	if !f.ext.waitForSync(ctx) {
		t.Fatal("informers did not sync")
	}
	if code, body := getHealthz(t, srv.URL); code != http.StatusOK {
		t.Errorf("running: /healthz %d %q", code, body)
	}
	cancel()
	wg.Wait()
	code, body := getHealthz(t, srv.URL)
	if code != http.StatusServiceUnavailable {
		t.Errorf("stopped: /healthz %d %q, want 503", code, body)
	}
	for _, want := range []string{"informers: nodes: informer stopped", "pods: informer stopped"} {
		if !strings.Contains(body, want) {
			t.Errorf("stopped: /healthz body %q lacks %q", body, want)
		}
	}
}
