package publisher

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// liveFailure returns the failing liveness check whose text starts with
// name, or "".
func liveFailure(h *serving.Health, name string) string {
	for _, f := range h.Live() {
		if strings.HasPrefix(f, name+": ") {
			return f
		}
	}
	return ""
}

// gate blocks the calls of a fake client's reactor while it is closed, as
// an API call that never answers.
type gate struct {
	closed  atomic.Bool
	release chan struct{}
	once    sync.Once
	// blocked is when the first call was held.
	blocked atomic.Pointer[time.Time]
}

func newGate(t *testing.T) *gate {
	g := &gate{release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) reactor(clienttesting.Action) (bool, runtime.Object, error) {
	if g.closed.Load() {
		now := time.Now()
		g.blocked.CompareAndSwap(nil, &now)
		<-g.release
	}
	return false, nil, nil
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// A cycle that blocks (here reading NodeMetrics, which never answers) fails
// /healthz once nothing progressed for --cycle-deadline, and not before:
// cycles running for longer than the deadline keep it passing, and so does
// the blocked cycle until its deadline. Once the cycle ends, it passes again.
func TestLivenessFailsOnlyAfterTheCycleDeadlineWhenACycleBlocks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewOptions()
	o.LeaderElection.LeaderElect = false
	o.Period, o.CycleDeadline = 50*time.Millisecond, 2*time.Second
	p, _ := newTestPublisherWith(t, ctx, o, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	g := newGate(t)
	p.metrics.(*metricsfake.Clientset).PrependReactor("list", "nodes", g.reactor)
	p.health = serving.NewHealth(prometheus.NewRegistry())
	p.addLiveChecks()
	done := make(chan struct{})
	go func() { defer close(done); p.cycles(ctx) }()
	defer func() { g.open(); cancel(); <-done }()

	// The last progress before the gate closes is at most a period and a
	// cycle before it; a failure earlier than this much before the deadline
	// after the gate closed is early.
	const slack = 300 * time.Millisecond
	var closedAt, failedAt time.Time
	healthy := o.CycleDeadline + 500*time.Millisecond
	// Looks every 200 ms: a failure, once there, lasts (the gate stays
	// closed), and on a loaded machine with -race looks every 100 ms came
	// further apart than the Absence allows.
	a := framework.Absence{Window: healthy + o.CycleDeadline - slack, Every: 200 * time.Millisecond,
		ControlAt: healthy, ControlWithin: o.CycleDeadline + 10*time.Second,
		Control: func() error {
			closedAt = time.Now()
			g.closed.Store(true)
			return nil
		},
		Look: func(time.Duration) ([]string, bool) {
			f := liveFailure(p.health, "cycle")
			now := time.Now()
			if f == "" {
				return nil, false
			}
			if failedAt.IsZero() {
				failedAt = now
			}
			if closedAt.IsZero() || now.Sub(closedAt) < o.CycleDeadline-slack {
				return []string{fmt.Sprintf("failing before the deadline (gate closed at %v, now %v): %s", closedAt, now, f)}, true
			}
			return nil, true
		}}
	framework.ExpectAbsence(t, a)
	if g.blocked.Load() == nil {
		t.Fatal("no cycle reached the closed gate: the check failed for another reason")
	}
	if f := liveFailure(p.health, "cycle"); !strings.Contains(f, "--cycle-deadline 2s") {
		t.Errorf("failure %q does not name the deadline", f)
	}
	t.Logf("/healthz failing %s after the cycle blocked (deadline %s)", failedAt.Sub(*g.blocked.Load()).Round(time.Millisecond), o.CycleDeadline)

	g.open()
	if _, ok := framework.Poll(10*time.Second, 20*time.Millisecond, func() bool { return liveFailure(p.health, "cycle") == "" }); !ok {
		t.Errorf("still failing 10 s after the cycle was released: %q", p.health.Live())
	}
}

// A cycle that writes many nodes for longer than the deadline is making
// progress: every write that ends counts, so it is never taken for a stuck
// one.
func TestLivenessCountsEveryNodeWrittenAsProgress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewOptions()
	o.LeaderElection.LeaderElect = false
	o.Period, o.CycleDeadline, o.Workers = 50*time.Millisecond, 500*time.Millisecond, 1
	var nodes []runtime.Object
	for i := range 12 {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}})
	}
	p, client := newTestPublisherWith(t, ctx, o, nodes...)
	const perWrite = 150 * time.Millisecond // 12 nodes one at a time: 1.8 s, over 3 deadlines
	var writes atomic.Int64
	client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		time.Sleep(perWrite)
		writes.Add(1)
		return false, nil, nil
	})
	p.health = serving.NewHealth(prometheus.NewRegistry())
	p.addLiveChecks()
	p.leading.Store(true)
	p.progressed()
	firstDone := make(chan struct{})
	go func() { defer close(firstDone); p.Cycle(ctx) }()
	framework.ExpectAbsence(t, framework.Absence{Window: time.Duration(len(nodes)) * perWrite, Every: 100 * time.Millisecond,
		Look: func(elapsed time.Duration) ([]string, bool) {
			select {
			case <-firstDone:
				// The control: the first cycle wrote every node, so the
				// looks saw a cycle longer than the deadline.
				return nil, elapsed > o.CycleDeadline && writes.Load() == int64(len(nodes))
			default:
			}
			if f := liveFailure(p.health, "cycle"); f != "" {
				return []string{fmt.Sprintf("after %d writes: %s", writes.Load(), f)}, false
			}
			return nil, false
		}, ControlWithin: 30 * time.Second})
	<-firstDone
}

// A standby, and a leader still waiting for its informers, pass whatever
// time went by; a leader passes until the deadline after its last progress.
func TestLivenessOfTheCycleOnlyCountsForASyncedLeader(t *testing.T) {
	o := NewOptions()
	o.Period = 15 * time.Second
	for _, tc := range []struct {
		name     string
		leading  bool
		progress time.Duration // ago; 0: none yet
		fail     bool
	}{
		{name: "standby", progress: time.Hour},
		{name: "leader waiting for its informers", leading: true},
		{name: "leader within the deadline", leading: true, progress: 115 * time.Second},
		{name: "leader past the deadline", leading: true, progress: 125 * time.Second, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Publisher{opts: o}
			p.leading.Store(tc.leading)
			if tc.progress > 0 {
				p.progress.Store(time.Now().Add(-tc.progress).UnixNano())
			}
			err := p.checkProgress()
			if (err != nil) != tc.fail {
				t.Errorf("checkProgress = %v, want failing %v (default deadline %s)", err, tc.fail, o.cycleDeadline())
			}
		})
	}
}

func TestCycleDeadlineDefaultsToFivePeriodsAndAtLeastTwoMinutes(t *testing.T) {
	for _, tc := range []struct {
		period, flag, want time.Duration
	}{
		{15 * time.Second, 0, 2 * time.Minute},
		{time.Minute, 0, 5 * time.Minute},
		{15 * time.Second, 45 * time.Second, 45 * time.Second},
	} {
		o := NewOptions()
		o.Period, o.CycleDeadline = tc.period, tc.flag
		if got := o.cycleDeadline(); got != tc.want {
			t.Errorf("--period %s --cycle-deadline %s: %s, want %s", tc.period, tc.flag, got, tc.want)
		}
	}
	o := NewOptions()
	o.CycleDeadline = 20 * time.Second
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--cycle-deadline (20s) must be at least twice --period (15s)") {
		t.Errorf("Validate = %v", err)
	}
	o.CycleDeadline = -time.Second
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--cycle-deadline must not be negative") {
		t.Errorf("Validate = %v", err)
	}
}

// Stopped informers fail /healthz, naming each.
func TestLivenessFailsOnceTheInformersStopped(t *testing.T) {
	o := NewOptions()
	o.LeaderElection.LeaderElect = false
	p, _ := newTestPublisherWith(t, context.Background(), o)
	// A second pair of informers, which this test stops.
	p = newPublisher(o, p.client, p.metrics, prometheus.NewRegistry())
	p.health = serving.NewHealth(prometheus.NewRegistry())
	p.addLiveChecks()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	p.startInformers(ctx, &wg)
	if !cache.WaitForCacheSync(ctx.Done(), p.hasSynced...) {
		t.Fatal("informers not synced")
	}
	if failed := p.health.Live(); len(failed) != 0 {
		t.Errorf("running: %q", failed)
	}
	cancel()
	wg.Wait()
	f := liveFailure(p.health, "informers")
	for _, want := range []string{"nodes: informer stopped", "pods: informer stopped"} {
		if !strings.Contains(f, want) {
			t.Errorf("failure %q lacks %q", f, want)
		}
	}
}

// The leader election carries a watchdog: a leader whose renewals hang (a
// Lease update that never answers, so the elector can neither renew nor
// give up) fails /healthz once it has not renewed for two lease durations,
// when every reader already counts it dead, and not before.
func TestLivenessFailsWhenTheLeaderStopsRenewing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewOptions()
	o.LeaderElection.LeaseDuration.Duration = time.Second
	o.LeaderElection.RenewDeadline.Duration = 500 * time.Millisecond
	o.LeaderElection.RetryPeriod.Duration = 100 * time.Millisecond
	o.LeaderElection.Identity = "me"
	p, client := newTestPublisherWith(t, ctx, o, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	// newPublisher made the watchdog from these options.
	g := newGate(t)
	client.PrependReactor("update", "leases", g.reactor)
	p.health = serving.NewHealth(prometheus.NewRegistry())
	p.addLiveChecks()
	var err error
	if p.elector, err = p.leaderElector(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.lead(ctx) }()
	defer func() {
		g.open()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("lead = %v after the shutdown", err)
		}
	}()
	if _, ok := framework.Poll(10*time.Second, 10*time.Millisecond, p.leading.Load); !ok {
		t.Fatal("did not lead within 10 s")
	}
	lease := o.LeaderElection.LeaseDuration.Duration
	// The last renewal before the gate closes is at most a retry period
	// before it.
	const slack = 300 * time.Millisecond
	var closedAt, failedAt time.Time
	healthy := 2*lease + 500*time.Millisecond
	// Looks every 200 ms, as in the cycle deadline's test.
	framework.ExpectAbsence(t, framework.Absence{Window: healthy + 2*lease - slack, Every: 200 * time.Millisecond,
		ControlAt: healthy, ControlWithin: 2*lease + 10*time.Second,
		Control: func() error {
			closedAt = time.Now()
			g.closed.Store(true)
			return nil
		},
		Look: func(time.Duration) ([]string, bool) {
			f := liveFailure(p.health, "leader-election")
			now := time.Now()
			if f == "" {
				return nil, false
			}
			if failedAt.IsZero() {
				failedAt = now
			}
			if closedAt.IsZero() || now.Sub(closedAt) < 2*lease-slack {
				return []string{fmt.Sprintf("failing before two lease durations without renewal (gate closed at %v, now %v): %s", closedAt, now, f)}, true
			}
			return nil, true
		}})
	if g.blocked.Load() == nil {
		t.Fatal("no renewal reached the closed gate: the check failed for another reason")
	}
	if f := liveFailure(p.health, "leader-election"); !strings.Contains(f, "leading, and the Lease kube-reclaim/kube-reclaim-publisher not renewed for") {
		t.Errorf("failure %q does not name the Lease", f)
	}
	t.Logf("/healthz failing %s after the renewal hung (lease duration %s)", failedAt.Sub(*g.blocked.Load()).Round(time.Millisecond), lease)
}
