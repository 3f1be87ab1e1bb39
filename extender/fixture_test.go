package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

var (
	testNames = reclaimable.MustNames(reclaimable.DefaultDomain)
	// t0 is the fake clock's start; annotations are written relative to it.
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is an extender fed by a fake clientset through its real informers,
// with a fake clock and a switchable publisher lease.
type fixture struct {
	t      testing.TB
	client *fake.Clientset
	ext    *core
	clock  *fakeClock
	alive  atomic.Bool
	reg    *prometheus.Registry
	h      http.Handler
}

type fixtureOpts struct {
	strategy      string
	assumeTimeout time.Duration
	// noStart leaves the informers stopped.
	noStart bool
	// requireEnforced is --require-enforced (off here: most tests use
	// pods as the user writes them, before any pod webhook).
	requireEnforced bool
	// schedulerNames is --scheduler-name (nil: the default).
	schedulerNames []string
}

func newFixture(t testing.TB, o fixtureOpts, objs ...runtime.Object) *fixture {
	t.Helper()
	if o.strategy == "" {
		o.strategy = StrategySpread
	}
	if o.assumeTimeout == 0 {
		o.assumeTimeout = 30 * time.Second
	}
	f := &fixture{t: t, client: fake.NewClientset(objs...), clock: &fakeClock{now: t0}, reg: prometheus.NewRegistry()}
	f.alive.Store(true)
	ext, err := newExtender(f.client, config{names: testNames, strategy: o.strategy,
		staleAfter: 10 * time.Minute, assumeTimeout: o.assumeTimeout, requireEnforced: o.requireEnforced,
		schedulerNames: o.schedulerNames}, nil, f.reg)
	if err != nil {
		t.Fatal(err)
	}
	ext.cache.SetClock(f.clock.Now, func(time.Time) bool { return f.alive.Load() })
	f.ext, f.h = ext, ext.server.handler()
	if !o.noStart {
		f.start()
	}
	return f
}

func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	f.ext.informers.run(ctx, new(sync.WaitGroup))
	if !f.ext.waitForSync(ctx) {
		f.t.Fatal("informers did not sync")
	}
}

// eventually polls cond for up to 5 s.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *fixture) post(path string, body any) *httptest.ResponseRecorder {
	f.t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			f.t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b)))
	return rec
}

func (f *fixture) filter(pod *corev1.Pod, nodes ...string) extenderv1.ExtenderFilterResult {
	f.t.Helper()
	rec := f.post("/filter", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodes})
	var res extenderv1.ExtenderFilterResult
	decodeOK(f.t, rec, &res)
	return res
}

func (f *fixture) prioritize(pod *corev1.Pod, nodes ...string) extenderv1.HostPriorityList {
	f.t.Helper()
	rec := f.post("/prioritize", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodes})
	var res extenderv1.HostPriorityList
	decodeOK(f.t, rec, &res)
	return res
}

// bind binds p to node as kube-scheduler does once its filter call passed
// node for p: the filter's record is put in place directly (admit), so that
// tests of bind's other checks need no filter call. bindOnly skips that.
func (f *fixture) bind(p *corev1.Pod, node string) extenderv1.ExtenderBindingResult {
	f.t.Helper()
	f.admit(p, node)
	return f.bindOnly(p, node)
}

// admit records what a filter call passing nodes for p records.
func (f *fixture) admit(p *corev1.Pod, nodes ...string) {
	f.ext.server.filtered.add(newPodRecord(testNames, p), nodes, f.clock.Now(), nil)
}

// bindOnly posts the bind of p to node, nothing else.
func (f *fixture) bindOnly(p *corev1.Pod, node string) extenderv1.ExtenderBindingResult {
	f.t.Helper()
	rec := f.post("/bind", extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node})
	var res extenderv1.ExtenderBindingResult
	decodeOK(f.t, rec, &res)
	return res
}

func decodeOK(t testing.TB, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("decoding %q: %v", rec.Body.String(), err)
	}
}

// free returns the node's current room as the extender sees it.
func (f *fixture) free(node string) reclaimable.Resources {
	st := make([]placement.State, 1)
	f.ext.cache.States([]string{node}, st)
	return st[0].Free
}

func (f *fixture) assumptions() int {
	a, _, _ := f.ext.cache.Counts()
	return a
}

// filtered reads filtered_nodes_total{reason}.
func (f *fixture) filtered(reason string) float64 {
	f.t.Helper()
	i := slices.Index(placement.ReasonLabels[:], reason)
	if i < 0 || f.ext.server.metrics.filtered[i] == nil {
		f.t.Fatalf("no filtered_nodes_total{reason=%q}", reason)
	}
	return testutil.ToFloat64(f.ext.server.metrics.filtered[i])
}

// bindRefusals sums bind_refusals_total over its reasons.
func (f *fixture) bindRefusals() float64 {
	var sum float64
	for _, r := range []string{refusedNoUID, refusedNotFiltered, refusedScheduler, refusedNoRequest, refusedBound, refusedMismatch, refusedNotEnforced, refusedNoRoom} {
		sum += testutil.ToFloat64(f.ext.server.metrics.bindRefusals.WithLabelValues(r))
	}
	return sum
}

// node returns a node publishing cpu millicores and mem bytes of room,
// written writtenAgo before t0.
func node(name string, cpu, mem int64, writtenAgo time.Duration) *corev1.Node {
	return bigNode(name).Room(cpu, mem).MeasuredAt(t0.Add(-writtenAgo - time.Minute)).WrittenAt(t0.Add(-writtenAgo)).Obj()
}

// bigNode has more native allocatable (and capacity) than any test
// annotates, so that only the clamp tests are clamped.
func bigNode(name string) *testobj.NodeWrapper {
	return testobj.MakeNode().Name(name).Capacity("1000", "16Ti")
}

// pod returns a pod asking cpu millicores and mem bytes of the reclaimed
// resources (requests == limits), bound to nodeName when not empty.
func pod(name, nodeName string, cpu, mem int64) *corev1.Pod {
	p := testobj.MakePod().Namespace("batch").Name(name).UID("uid-"+name).SchedulerName(SchedulerName).
		Container("main", "busybox").Reclaimed(cpu, mem).Phase(corev1.PodPending)
	if nodeName != "" {
		p.Node(nodeName).Phase(corev1.PodRunning)
	}
	return p.Obj()
}

func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

// mismatched returns a pod whose reclaimed CPU request differs from its limit.
func mismatched(name string) *corev1.Pod {
	p := pod(name, "", 1000, gi)
	p.Spec.Containers[0].Resources.Limits[testNames.CPU] = *resource.NewQuantity(2000, resource.DecimalSI)
	return p
}

// plainPod asks only native resources.
func plainPod(name string) *corev1.Pod {
	return testobj.MakePod().Namespace("batch").Name(name).UID("uid-"+name).SchedulerName(SchedulerName).
		Container("main", "busybox").Req("500m", "").Phase(corev1.PodPending).Obj()
}

func req(cpu, mem int64) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
}
