package extender

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
	"github.com/kube-reclaim/kube-reclaim/test/heldwatch"
)

// Run waits for every part: its return shows that the first failure (or
// the end of ctx) stopped the health server, the informers' wait and the
// verbs server.
func TestRunStopsEveryPartOnTheFirstFailureOrShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		busy    bool // the verbs' address is taken, so listening fails after the sync
		wantErr string
	}{
		{"verbs address taken", true, "address already in use"},
		{"shutdown", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{noStart: true})
			o := NewOptions()
			o.ListenAddress = servingtest.FreeAddr(t)
			if tc.busy {
				busy, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer busy.Close()
				o.ListenAddress = busy.Addr().String()
			}
			e, cancel, done := startRun(t, f, o)
			if !tc.busy {
				// The verbs are served before the shutdown.
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if res, err := http.Post("http://"+o.ListenAddress+"/filter", "application/json", strings.NewReader("{}")); err == nil {
						res.Body.Close()
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the verbs were not served within 10 s")
					}
				}
				cancel()
			}
			select {
			case err := <-done:
				if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
					t.Errorf("Run = %v, want %q", err, tc.wantErr)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return")
			}
			ln, err := net.Listen("tcp", e.endpoints.HealthAddress)
			if err != nil {
				t.Fatalf("the health server still holds %s: %v", e.endpoints.HealthAddress, err)
			}
			ln.Close()
		})
	}
}

// Run returns only once its informers have stopped: a pod watch whose Stop
// is held keeps Run from returning until it is released.
func TestRunReturnsOnlyAfterItsInformersStopped(t *testing.T) {
	f := newFixture(t, fixtureOpts{noStart: true})
	held := heldwatch.New()
	f.client.PrependWatchReactor("pods", held.Reactor(f.client.Tracker()))
	o := NewOptions()
	o.ListenAddress = servingtest.FreeAddr(t)
	_, cancel, done := startRun(t, f, o)
	held.CheckRunWaits(t, cancel, done)
}

// startRun runs an Extender of f's core with o until cancel; done carries
// what Run returned.
func startRun(t *testing.T, f *fixture, o *Options) (e *Extender, cancel context.CancelFunc, done <-chan error) {
	e = &Extender{opts: o, core: f.ext, health: serving.NewHealth(prometheus.NewRegistry()),
		endpoints: serving.Endpoints{HealthAddress: servingtest.FreeAddr(t)}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	result := make(chan error, 1)
	go func() { result <- e.Run(ctx) }()
	return e, cancel, result
}
