package publisher

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
	"github.com/kube-reclaim/kube-reclaim/test/heldwatch"
)

// Run waits for every part: it can only return once the part that failed
// stopped the others, among them the cycles, which would otherwise wait
// for informers that never sync against an API server that is not there.
func TestRunReturnsTheFirstFailureOnceEveryPartStopped(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	o := NewOptions()
	o.Kubeconfig = servingtest.UnreachableKubeconfig(t)
	o.HealthAddress, o.MetricsAddress = busy.Addr().String(), ""
	o.LeaderElection.LeaderElect = false
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("Run = %v, want the health server's bind error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop after its health server failed")
	}
}

func TestLeadEndsWithAnErrorOnlyWhenTheLeaseIsLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lose    bool // the Lease can no longer be renewed; otherwise ctx ends
		wantErr error
	}{
		{"lease lost", true, errLostLeadership},
		{"shutdown", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := NewOptions()
			o.LeaderElection.LeaseDuration.Duration = time.Second
			o.LeaderElection.RenewDeadline.Duration = 500 * time.Millisecond
			o.LeaderElection.RetryPeriod.Duration = 100 * time.Millisecond
			o.LeaderElection.Identity = "me"
			p, client := newTestPublisherWith(t, ctx, o, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			// The fake API does not check resource versions, so another
			// holder's write would not stop the renewals: refuse them.
			// Reactors cannot be added while the client is in use.
			var refuse atomic.Bool
			client.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
				if refuse.Load() {
					return true, nil, errors.New("lease taken by another replica")
				}
				return false, nil, nil
			})
			var err error
			if p.elector, err = p.leaderElector(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.lead(ctx) }()
			for deadline := time.Now().Add(10 * time.Second); !p.leading.Load(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("did not lead within 10 s")
				}
			}
			if tc.lose {
				refuse.Store(true)
			} else {
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Errorf("lead = %v, want %v", err, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("lead did not return")
			}
		})
	}
}

// Run returns only once its informers have stopped: a pod watch whose Stop
// is held keeps Run from returning until it is released.
func TestRunReturnsOnlyAfterItsInformersStopped(t *testing.T) {
	o := NewOptions()
	o.LeaderElection.LeaderElect = false
	client := fake.NewClientset()
	held := heldwatch.New()
	client.PrependWatchReactor("pods", held.Reactor(client.Tracker()))
	reg := prometheus.NewRegistry()
	p := newPublisher(o, client, metricsfake.NewSimpleClientset(), reg)
	file, err := policyfile.Load("", 0)
	if err != nil {
		t.Fatal(err)
	}
	p.file, p.health = file, serving.NewHealth(reg)
	p.endpoints = serving.Endpoints{HealthAddress: servingtest.FreeAddr(t)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	held.CheckRunWaits(t, cancel, done)
}
