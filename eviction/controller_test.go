package eviction

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const period = 10 * time.Second

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

// Node n1 of the harness: 16 cores, 64Gi allocatable.
var alloc = reclaimable.Resources{CPUMilli: 16000, MemoryBytes: 64 * gi}

// harness is a controller on a fake clientset and a fake clock, with one
// node "n1" whose pods and usage the test sets.
type harness struct {
	c       *Controller
	clock   *testingclock.FakeClock
	client  *fake.Clientset
	events  *record.FakeRecorder
	reg     *prometheus.Registry
	pods    map[string][]*corev1.Pod
	evicted []string
	// use is each reclaimed pod's measured usage, by name (a pod without
	// an entry is not measured); regular what the regular pods use.
	use     map[string]reclaimable.Resources
	regular reclaimable.Resources
	// settings are n1's pool's eviction settings.
	settings policy.EvictionSettings
	// refuse makes the Eviction API answer 429 for these pods, as it does
	// when a PodDisruptionBudget forbids the disruption.
	refuse map[string]bool
}

func newHarness(t *testing.T, mode Mode, tune ...func(*Options)) *harness {
	t.Helper()
	o := NewOptions()
	o.Mode = mode
	for _, f := range tune {
		f(&o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &harness{clock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		client: fake.NewClientset(), events: record.NewFakeRecorder(1000), reg: prometheus.NewRegistry(),
		pods: map[string][]*corev1.Pod{}, use: map[string]reclaimable.Resources{}, refuse: map[string]bool{},
		settings: policy.DefaultEviction()}
	h.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		key := ev.Namespace + "/" + ev.Name
		if h.refuse[key] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		h.evicted = append(h.evicted, key)
		// The apiserver starts the graceful deletion: the pod is leaving.
		for _, p := range h.pods["n1"] {
			if p.Namespace == ev.Namespace && p.Name == ev.Name {
				now := metav1.NewTime(h.clock.Now())
				p.DeletionTimestamp = &now
			}
		}
		return true, nil, nil
	})
	h.c = New(Config{Options: o, Period: period, Timeout: time.Second, Client: h.client,
		Pods: func(n string) []*policyinput.Pod {
			// As the publisher's cache would hold them now.
			var out []*policyinput.Pod
			for _, p := range h.pods[n] {
				out = append(out, policyinput.NewPod(names, p))
			}
			return out
		}, Clock: h.clock}, h.reg)
	h.c.SetRecorder(h.events)
	return h
}

func reclaimedPod(name string, prio int32, age time.Duration, now time.Time, cpuMilli, memBytes int64) *corev1.Pod {
	return testobj.MakePod().Namespace("batch").Name(name).UID("uid-"+name).CreatedAt(now.Add(-age)).
		Node("n1").Priority(prio).Reclaimed(cpuMilli, memBytes).Phase(corev1.PodRunning).Obj()
}

func regularPod(name string, now time.Time) *corev1.Pod {
	return testobj.MakePod().Namespace("apps").Name(name).UID("uid-"+name).CreatedAt(now).
		Node("n1").Priority(-100).Req("2", "").Phase(corev1.PodRunning).Obj()
}

// freshness of an observation.
type freshness int

const (
	fresh freshness = iota
	stale           // measured longer ago than --metrics-stale-after
	never           // never measured
)

// observe runs one publish cycle for n1: what its pods use (the regular
// usage plus every reclaimed pod's, leaving ones included: they still run),
// the given room and freshness; then advances the clock by a period.
func (h *harness) observe(room int64, f freshness) {
	now := h.clock.Now()
	obs := Observation{Node: "n1", Allocatable: alloc, Used: h.regular, Settings: h.settings,
		Room: reclaimable.Resources{CPUMilli: room, MemoryBytes: 64 * gi}}
	switch f {
	case fresh:
		obs.Time = now.Add(-15 * time.Second)
	case stale:
		obs.Time = now.Add(-reclaimable.DefaultMetricsStaleAfter - time.Second)
	}
	for _, p := range h.pods["n1"] {
		req, _ := names.PodRequest(p)
		if req.IsZero() {
			continue
		}
		obs.Held = obs.Held.Add(req)
		u, ok := h.use[p.Name]
		obs.Used = obs.Used.Add(u)
		obs.Reclaimed = append(obs.Reclaimed, PodUsage{UID: p.UID, Grant: req, Used: u, Measured: ok})
	}
	h.c.Observe(obs)
	h.c.Act(context.Background())
	h.clock.Step(period)
}

// finishLeaving removes the pods being deleted: their containers stopped,
// and kubelet confirmed it.
func (h *harness) finishLeaving() {
	var kept []*corev1.Pod
	for _, p := range h.pods["n1"] {
		if p.DeletionTimestamp == nil {
			kept = append(kept, p)
		}
	}
	h.pods["n1"] = kept
}

func (h *harness) evictionCalls() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "eviction" {
			n++
		}
	}
	return n
}

func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) evictions(mode, reason string) float64 {
	return testutil.ToFloat64(h.c.m.evictions.WithLabelValues(mode, reason))
}

// fourBatchPods: four reclaimed pods of 1 CPU and 4Gi, each using 4Gi,
// beside a regular pod; the regular pods use regularMem.
func (h *harness) fourBatchPods(regularMem int64) {
	now := h.clock.Now()
	h.pods["n1"] = []*corev1.Pod{
		reclaimedPod("high-old", 100, time.Hour, now, 1000, 4*gi),
		reclaimedPod("low-old", 0, time.Hour, now, 1000, 4*gi),
		reclaimedPod("low-young", 0, time.Minute, now, 1000, 4*gi),
		reclaimedPod("mid", 50, time.Minute, now, 1000, 4*gi),
		regularPod("svc", now),
	}
	for _, n := range []string{"high-old", "low-old", "low-young", "mid"} {
		h.use[n] = res(500, 4*gi)
	}
	h.regular = res(2000, regularMem)
}

// The defect of issue 40: a room below what the batch pods hold (a CPU
// forecast that dipped) evicted them. It stops placement only.
func TestARoomBelowWhatIsHeldEvictsNothingWithoutMemoryPressure(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.fourBatchPods(16 * gi)   // 32Gi of 64Gi in use: no pressure
	h.regular.CPUMilli = 15000 // regular CPU near allocatable
	for i := 0; i < 60; i++ {
		h.observe(0, fresh)
		if n := h.evictionCalls(); n != 0 {
			t.Fatalf("cycle %d: %d eviction calls with room 0 below 4000m held and memory at half", i, n)
		}
		if g := testutil.ToFloat64(h.c.m.overRoom); g != 1 {
			t.Fatalf("cycle %d: nodes_over_room = %v, want 1 (the dip is still counted)", i, g)
		}
	}
	// Positive control: memory pressure on the same node evicts.
	h.regular.MemoryBytes = 44 * gi // 60Gi of 64Gi: above 90 %
	for i := 0; i < 3; i++ {
		h.observe(0, fresh)
	}
	if h.evictionCalls() == 0 {
		t.Fatal("control: memory pressure on the same node evicted nothing after the grace")
	}
}

func TestMemoryPressureEvictsTheFewestLowestPriorityPodsUntilBelowTheLowerThreshold(t *testing.T) {
	h := newHarness(t, ModeOn)
	// 44Gi regular + 16Gi batch = 60Gi > 57.6Gi (90 %); until 54.4Gi
	// (85 %): 5.6Gi to free, two pods of 4Gi.
	h.fourBatchPods(44 * gi)
	for i := 0; i < 3; i++ {
		h.observe(8000, fresh)
	}
	if want := []string{"batch/low-young", "batch/low-old"}; !slices.Equal(h.evicted, want) {
		t.Fatalf("evicted %v, want %v", h.evicted, want)
	}
	// While they leave, they count as freed: nothing more.
	for i := 0; i < 5; i++ {
		h.observe(8000, fresh)
	}
	if len(h.evicted) != 2 {
		t.Fatalf("evicted %v while the first two were leaving, want only them", h.evicted)
	}
	// Gone: 52Gi, under 85 %. The episode is over.
	h.finishLeaving()
	for i := 0; i < 10; i++ {
		h.observe(8000, fresh)
	}
	if len(h.evicted) != 2 || testutil.ToFloat64(h.c.m.memoryPressure) != 0 {
		t.Fatalf("evicted %v under the lower threshold (nodes_memory_pressure %v), want the episode over", h.evicted, testutil.ToFloat64(h.c.m.memoryPressure))
	}
	// Regular use rises to 55.5Gi + 8Gi: above 90 % again, a new episode.
	h.regular.MemoryBytes = 50 * gi
	for i := 0; i < 3; i++ {
		h.observe(8000, fresh)
	}
	if want := []string{"batch/low-young", "batch/low-old", "batch/mid"}; !slices.Equal(h.evicted, want) {
		t.Errorf("second episode evicted %v, want %v (58Gi to under 54.4Gi: one pod)", h.evicted, want)
	}
	if got := h.evictions("on", PressureMemory); got != 3 {
		t.Errorf("evictions_total{mode=on,reason=memory-pressure} = %v, want 3", got)
	}
	for _, n := range []string{"svc"} {
		if slices.Contains(h.evicted, "apps/"+n) {
			t.Errorf("regular pod %s evicted", n)
		}
	}
}

// Assess is the pure decision; the thresholds' hysteresis, cycle by cycle.
func TestAssessMemoryHysteresis(t *testing.T) {
	p := Params{Grace: 2 * period, Slack: period / 10, StaleAfter: reclaimable.DefaultMetricsStaleAfter}
	steps := []struct {
		usedPct  int64 // of allocatable memory
		pressure bool
	}{
		{80, false}, {92, false}, // over since here
		{92, false}, {92, true}, // two periods over: pressure
		{88, true}, {86, true}, // between the thresholds: go on
		{84, false},              // under 85 %: stop
		{88, false}, {89, false}, // under 90 %: no new episode
		{91, false}, {80, false}, {91, false}, // a dip restarts the grace
		{91, false}, {91, true},
	}
	var st NodeState
	now := t0
	for i, s := range steps {
		obs := Observation{Node: "n", Allocatable: alloc, Time: now, Settings: policy.DefaultEviction(),
			Used: reclaimable.Resources{MemoryBytes: alloc.MemoryBytes * s.usedPct / 100}}
		v := st.Assess(&obs, now, p)
		if got := v.Memory != nil; got != s.pressure {
			t.Fatalf("step %d (%d %%): pressure %v, want %v", i, s.usedPct, got, s.pressure)
		}
		if v.Memory != nil {
			if want := obs.Used.MemoryBytes - int64(0.85*float64(alloc.MemoryBytes)); v.Memory.Free != want {
				t.Errorf("step %d: free %d, want %d (down to 85 %%)", i, v.Memory.Free, want)
			}
		}
		now = now.Add(period)
	}
}

func TestStaleOrMissingMetricsNeverEvict(t *testing.T) {
	for _, f := range []freshness{stale, never} {
		t.Run(map[freshness]string{stale: "stale", never: "never measured"}[f], func(t *testing.T) {
			h := newHarness(t, ModeOn)
			h.fourBatchPods(60 * gi) // 76Gi of 64Gi
			h.settings.CPUStarvation.Enabled = true
			h.settings.CPUStarvation.Window = 5 * time.Minute
			h.regular.CPUMilli = 16000
			for i := 0; i < 60; i++ {
				h.observe(0, f)
				if n := h.evictionCalls(); n != 0 {
					t.Fatalf("cycle %d: %d eviction calls on data that is not fresh", i, n)
				}
			}
			if g := testutil.ToFloat64(h.c.m.memoryPressure) + testutil.ToFloat64(h.c.m.overRoom); g != 0 {
				t.Errorf("gauges count the node on data that is not fresh")
			}
			// Positive control: the same node on fresh data.
			for i := 0; i < 3; i++ {
				h.observe(0, fresh)
			}
			if h.evictionCalls() == 0 {
				t.Fatal("control: fresh data at 76Gi of 64Gi evicted nothing after the grace")
			}
		})
	}
}

// A stale cycle restarts the grace: stale time never counts.
func TestGraceMustPassOnFreshDataBeforeEvicting(t *testing.T) {
	h := newHarness(t, ModeOn) // grace: two periods
	h.fourBatchPods(50 * gi)
	h.observe(0, fresh) // over since now
	h.observe(0, fresh) // one period over
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("evicted within the grace: %d calls", n)
	}
	h.observe(0, stale)
	h.observe(0, fresh)
	h.observe(0, fresh)
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("evicted although the run over the threshold was broken by stale data: %d calls", n)
	}
	h.observe(0, fresh) // two periods over
	if n := h.evictionCalls(); n == 0 {
		t.Fatal("nothing evicted two periods (the grace) after memory went over the threshold")
	}
}

// A pod not measured yet counts at its memory grant (its limit), the most
// it can free: fewer go at once, and measured cycles evict more if needed.
func TestAnUnmeasuredPodCountsAtItsGrant(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.fourBatchPods(44 * gi)
	delete(h.use, "low-young") // counted at 4Gi; node use then 56Gi
	h.regular.MemoryBytes = 48 * gi
	for i := 0; i < 3; i++ {
		h.observe(8000, fresh)
	}
	// 60Gi measured, 5.6Gi to free: low-young (4Gi, by its grant), low-old.
	if want := []string{"batch/low-young", "batch/low-old"}; !slices.Equal(h.evicted, want) {
		t.Errorf("evicted %v, want %v", h.evicted, want)
	}
}

func TestCPUStarvation(t *testing.T) {
	type step struct {
		cycles  int
		nodeCPU int64 // regular pods' CPU, of 16000m
		podCPU  int64 // each batch pod's, of its 1000m grant
	}
	cases := []struct {
		name    string
		enabled bool
		steps   []step
		want    int // evictions
	}{
		{"off by default: starved for an hour evicts nothing", false, []step{{360, 15000, 100}}, 0},
		{"on: starved for the window moves every starved pod", true, []step{{182, 15000, 100}}, 4},
		{"on: starved for less than the window evicts nothing", true, []step{{170, 15000, 100}}, 0},
		{"on: a short spike never evicts, however often", true, []step{
			{6, 15000, 100}, {60, 4000, 100}, {6, 15000, 100}, {60, 4000, 100}, {6, 15000, 100}, {60, 4000, 100}}, 0},
		{"on: one cycle unstarved restarts the window", true, []step{{170, 15000, 100}, {1, 15000, 900}, {170, 15000, 100}}, 0},
		{"on: an idle pod on a node that is not saturated is not starved", true, []step{{360, 8000, 0}}, 0},
		{"on: a pod using its share is not starved on a saturated node", true, []step{{360, 15000, 600}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, ModeOn, func(o *Options) { o.NodeBurst, o.ClusterBurst = 10, 10 })
			h.fourBatchPods(16 * gi)
			h.settings.CPUStarvation.Enabled = tc.enabled
			total := 0
			for _, s := range tc.steps {
				for i := 0; i < s.cycles; i++ {
					h.regular.CPUMilli = s.nodeCPU
					for n := range h.use {
						h.use[n] = res(s.podCPU, 4*gi)
					}
					h.observe(8000, fresh)
					total++
					if tc.want == 0 && len(h.evicted) > 0 {
						t.Fatalf("cycle %d: evicted %v", total, h.evicted)
					}
				}
			}
			if len(h.evicted) != tc.want {
				t.Fatalf("evicted %v after %d cycles, want %d evictions", h.evicted, total, tc.want)
			}
			if tc.want > 0 {
				if got := h.evictions("on", PressureCPUStarvation); got != float64(tc.want) {
					t.Errorf("evictions_total{reason=cpu-starvation} = %v, want %d", got, tc.want)
				}
				ev := h.drainEvents()
				if len(ev) == 0 || !strings.HasPrefix(ev[0], "Warning ReclaimedPodEvicted cpu starvation: used 100m of its 1000m cpu grant for 30m0s while the node's pods used 15400m of 16000m allocatable; evicted so that it can run elsewhere") {
					t.Errorf("first event %q", ev)
				}
			}
		})
	}
}

func TestEveryEvictionRecordsAnEventNamingThePressure(t *testing.T) {
	h := newHarness(t, ModeOn)
	now := h.clock.Now()
	h.pods["n1"] = []*corev1.Pod{reclaimedPod("a", 0, time.Minute, now, 2000, 8*gi), reclaimedPod("b", 0, time.Hour, now, 2000, 8*gi)}
	h.use["a"], h.use["b"] = res(100, 6*gi), res(100, 6*gi)
	h.regular = res(0, 50*gi) // 62Gi: 7.6Gi to free
	for i := 0; i < 3; i++ {
		h.observe(0, fresh)
	}
	got := h.drainEvents()
	const why = "Warning ReclaimedPodEvicted memory pressure: the node's pods use 62Gi of 64Gi allocatable (96.9 %); evicting above 90 % until below 85 %; "
	want := []string{why + "evicted to free 6Gi", why + "evicted batch/a to free 6Gi", why + "evicted to free 6Gi", why + "evicted batch/b to free 6Gi"}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAPodDisruptionBudgetRefusalIsReportedRetriedLaterAndNeverBypassed(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.fourBatchPods(60 * gi) // 76Gi: every pod must go
	for _, p := range h.pods["n1"] {
		if p.Namespace == "batch" {
			h.refuse["batch/"+p.Name] = true
		}
	}
	const cycles = 30
	for i := 0; i < cycles; i++ {
		before := h.evictionCalls()
		h.observe(0, fresh)
		if n := h.evictionCalls() - before; n > 1 {
			t.Fatalf("cycle %d: %d eviction calls on one node, want at most one refused call per cycle", i, n)
		}
	}
	calls := h.evictionCalls()
	t.Logf("%d refused eviction calls in %d cycles", calls, cycles)
	// Each pod backs off (1, 2, 4, ... periods), so over 30 periods after
	// the grace far fewer calls than cycles are made, yet some are retried.
	if calls < 4 || calls > cycles/2 {
		t.Errorf("%d refused eviction calls in %d cycles; want every pod tried and retried with back-off (4..%d)", calls, cycles, cycles/2)
	}
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("a refused eviction was bypassed: %s %s", a.GetVerb(), a.GetResource())
		}
	}
	if got := testutil.ToFloat64(h.c.m.blocked); got != float64(calls) {
		t.Errorf("evictions_blocked_total = %v, want %d (one per refused call)", got, calls)
	}
	const why = "Warning ReclaimedPodEvictionBlocked memory pressure: the node's pods use 76Gi of 64Gi allocatable (118.8 %); evicting above 90 % until below 85 %; "
	var podEv, nodeEv int
	for _, e := range h.drainEvents() {
		switch {
		case strings.HasPrefix(e, why+"eviction to free 4Gi refused by a PodDisruptionBudget"):
			podEv++
		case strings.HasPrefix(e, why+"eviction of batch/"):
			nodeEv++
		default:
			t.Errorf("unexpected event %q", e)
		}
	}
	if podEv != calls || nodeEv != calls {
		t.Errorf("%d pod and %d node events for %d refusals, want one of each per refusal", podEv, nodeEv, calls)
	}
	// Once the budget allows it, the eviction goes through.
	clear(h.refuse)
	for i := 0; i < 20 && len(h.evicted) < 4; i++ {
		h.observe(0, fresh)
	}
	if len(h.evicted) != 4 {
		t.Errorf("evicted %v once the budget allowed it, want the 4 batch pods", h.evicted)
	}
}

func TestDryRunCountsAndRecordsEventsButEvictsNothing(t *testing.T) {
	h := newHarness(t, ModeDryRun)
	h.fourBatchPods(44 * gi)
	for i := 0; i < 3; i++ {
		h.observe(8000, fresh)
	}
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("dry-run made %d eviction calls", n)
	}
	if got := h.evictions("dry-run", PressureMemory); got != 2 {
		t.Errorf("evictions_total{mode=dry-run,reason=memory-pressure} = %v, want 2 (what on would evict)", got)
	}
	const why = "Normal ReclaimedPodEvictionDryRun memory pressure: the node's pods use 60Gi of 64Gi allocatable (93.8 %); evicting above 90 % until below 85 %; "
	want := []string{
		why + "would evict to free 4Gi (--eviction=dry-run)",
		why + "would evict batch/low-young to free 4Gi (--eviction=dry-run)",
		why + "would evict to free 4Gi (--eviction=dry-run)",
		why + "would evict batch/low-old to free 4Gi (--eviction=dry-run)",
	}
	if ev := h.drainEvents(); !slices.Equal(ev, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
	// The next cycle, within the grace, does not report the same pods again.
	h.observe(8000, fresh)
	if got := h.evictions("dry-run", PressureMemory); got != 2 {
		t.Errorf("dry-run reported again within the grace: evictions_total = %v", got)
	}
}

func TestOffEvictsNothingButKeepsTheGauges(t *testing.T) {
	h := newHarness(t, ModeOff)
	h.fourBatchPods(60 * gi)
	for i := 0; i < 5; i++ {
		h.observe(0, fresh)
	}
	if n, ev := h.evictionCalls(), h.drainEvents(); n != 0 || len(ev) != 0 {
		t.Errorf("off: %d eviction calls, events %v", n, ev)
	}
	if g := testutil.ToFloat64(h.c.m.overRoom); g != 1 {
		t.Errorf("nodes_over_room = %v, want 1", g)
	}
	if g := testutil.ToFloat64(h.c.m.memoryPressure); g != 1 {
		t.Errorf("nodes_memory_pressure = %v, want 1", g)
	}
	h.regular.MemoryBytes = 0
	h.observe(8000, fresh)
	if g := testutil.ToFloat64(h.c.m.overRoom) + testutil.ToFloat64(h.c.m.memoryPressure); g != 0 {
		t.Errorf("gauges %v once the room covers what is held and memory is low, want 0", g)
	}
}

func TestRateLimitsSpreadEvictionsOverCycles(t *testing.T) {
	cases := []struct {
		name string
		tune func(*Options)
	}{
		{"per node", func(o *Options) { o.NodeBurst, o.NodeRate = 1, 60.0/period.Seconds() }},
		{"cluster-wide", func(o *Options) { o.ClusterBurst, o.ClusterRate = 1, 60.0/period.Seconds() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, ModeOn, tc.tune) // one eviction per period
			h.fourBatchPods(60 * gi)
			var perCycle []int
			for i := 0; i < 7; i++ {
				before := len(h.evicted)
				h.observe(0, fresh)
				perCycle = append(perCycle, len(h.evicted)-before)
			}
			if want := []int{0, 0, 1, 1, 1, 1, 0}; !slices.Equal(perCycle, want) {
				t.Errorf("evictions per cycle %v, want %v", perCycle, want)
			}
			if got := testutil.ToFloat64(h.c.m.rateLimited); got == 0 {
				t.Error("evictions_rate_limited_total stayed 0")
			}
		})
	}
}

func TestMeasureSumsTheFreshSamplesOfEveryPod(t *testing.T) {
	now := t0
	in := policy.Node{Name: "n1", Allocatable: alloc, Pods: []policy.Pod{
		{UID: "r1", Samples: []policy.Sample{{Time: now.Add(-time.Minute), CPUMilli: 1, MemoryBytes: gi}, {Time: now.Add(-30 * time.Second), CPUMilli: 1000, MemoryBytes: 10 * gi}}},
		{UID: "r-stale", Samples: []policy.Sample{{Time: now.Add(-time.Hour), CPUMilli: 5000, MemoryBytes: 30 * gi}}},
		{UID: "r-new"},
		{UID: "b1", Reclaimed: true, Grant: res(2000, 4*gi), Samples: []policy.Sample{{Time: now.Add(-15 * time.Second), CPUMilli: 300, MemoryBytes: 3 * gi}}},
		{UID: "b-new", Reclaimed: true, Grant: res(1000, gi)},
	}}
	r := policy.Result{Resources: res(4000, 8*gi), MetricsTime: now.Add(-15 * time.Second)}
	obs := Measure(&in, r, res(3000, 5*gi), policy.DefaultEviction(), now, 0, nil)
	if want := res(1300, 13*gi); obs.Used != want {
		t.Errorf("used %+v, want %+v (the newest fresh samples: r1 and b1)", obs.Used, want)
	}
	want := []PodUsage{{UID: "b1", Grant: res(2000, 4*gi), Used: res(300, 3*gi), Measured: true}, {UID: "b-new", Grant: res(1000, gi)}}
	if !slices.Equal(obs.Reclaimed, want) {
		t.Errorf("reclaimed %+v, want %+v", obs.Reclaimed, want)
	}
	if obs.Time != r.MetricsTime || obs.Room != r.Resources || obs.Held != res(3000, 5*gi) || obs.Allocatable != alloc {
		t.Errorf("observation %+v does not carry the result's time, room, held and allocatable", obs)
	}
}

func TestEventTextIsReadable(t *testing.T) {
	m := MemoryVerdict{Used: 1684432486, AboveShare: 0.75, UntilShare: 0.725}
	if got, want := memoryText(m, res(0, 2*gi)),
		"memory pressure: the node's pods use 1606Mi of 2Gi allocatable (78.4 %); evicting above 75 % until below 72.5 %"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	s := Starved{Since: t0, Used: 120, Grant: 4000, NodeUsed: 15800}
	if got, want := starvationText(s, res(16000, 0), t0.Add(31*time.Minute)),
		"cpu starvation: used 120m of its 4000m cpu grant for 31m0s while the node's pods used 15800m of 16000m allocatable"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	o := Options{Mode: "yes", Grace: -time.Second, NodeRate: 0, ClusterRate: -1, NodeBurst: 0, ClusterBurst: 0}
	err := o.Validate()
	for _, flag := range []string{"--eviction ", "--eviction-grace", "--eviction-node-rate", "--eviction-cluster-rate", "--eviction-node-burst", "--eviction-cluster-burst"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate() = %v, want it to name %s", err, flag)
		}
	}
	d := NewOptions()
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if d.Mode != ModeOn {
		t.Errorf("default mode %q, want on (docs/design.md says why)", d.Mode)
	}
}
