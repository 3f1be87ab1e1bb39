package webhook

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The profile informers are part of the webhook's liveness: running, they
// pass; stopped, /healthz fails naming each, since the pod webhook would
// judge namespaces and PriorityClasses from a cache that no longer changes.
func TestLivenessFailsOnceTheProfileInformersStopped(t *testing.T) {
	file, err := policyfile.Load("", 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := serving.NewHealth(reg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	startProfiles(ctx, &wg, fake.NewClientset(), reclaimable.MustNames(reclaimable.DefaultDomain), file, reg, h)
	for deadline := time.Now().Add(10 * time.Second); len(h.Ready()) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 10 s: %q", h.Ready())
		}
	}
	if failed := h.Live(); len(failed) != 0 {
		t.Errorf("running: %q", failed)
	}
	cancel()
	wg.Wait()
	failed := strings.Join(h.Live(), "\n")
	for _, want := range []string{"profile-informers: namespaces: informer stopped", "priorityclasses: informer stopped"} {
		if !strings.Contains(failed, want) {
			t.Errorf("stopped: %q lacks %q", failed, want)
		}
	}
}
