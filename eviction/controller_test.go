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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const period = 10 * time.Second

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

// harness is a controller on a fake clientset and a fake clock, with one
// node "n1" whose pods the test sets.
type harness struct {
	c       *Controller
	clock   *testingclock.FakeClock
	client  *fake.Clientset
	events  *record.FakeRecorder
	reg     *prometheus.Registry
	pods    map[string][]*corev1.Pod
	evicted []string
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
		pods: map[string][]*corev1.Pod{}, refuse: map[string]bool{}}
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

func reclaimedPod(name string, prio int32, age time.Duration, now time.Time, cpuMilli int64) *corev1.Pod {
	q := *resource.NewQuantity(cpuMilli, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: &prio, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{names.CPU: q}, Limits: corev1.ResourceList{names.CPU: q}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func regularPod(name string, now time.Time) *corev1.Pod {
	prio := int32(-100)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now)},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: &prio, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// held sums what the node's reclaimed pods hold, as the publisher does.
func (h *harness) held(node string) reclaimable.Resources {
	var r reclaimable.Resources
	for _, p := range h.pods[node] {
		req, _ := names.PodRequest(p)
		r = r.Add(req)
	}
	return r
}

// cycle runs one publish cycle for n1 with the given room and freshness,
// then advances the clock by a period.
func (h *harness) cycle(room int64, zeroReason string) {
	res := policy.Result{Resources: reclaimable.Resources{CPUMilli: room, MemoryBytes: 64 << 30}, ZeroReason: zeroReason}
	h.c.Observe("n1", res, h.held("n1"))
	h.c.Act(context.Background())
	h.clock.Step(period)
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

// evictions sums evictions_total{mode} over the reasons the controller
// counts.
func (h *harness) evictions(mode string) float64 {
	var sum float64
	for _, r := range []string{"over-room-cpu", "over-room-memory", "over-room-cpu-memory"} {
		sum += testutil.ToFloat64(h.c.m.evictions.WithLabelValues(mode, r))
	}
	return sum
}

func fourBatchPods(now time.Time) []*corev1.Pod {
	return []*corev1.Pod{
		reclaimedPod("high-old", 100, time.Hour, now, 1000),
		reclaimedPod("low-old", 0, time.Hour, now, 1000),
		reclaimedPod("low-young", 0, time.Minute, now, 1000),
		reclaimedPod("mid", 50, time.Minute, now, 1000),
		regularPod("svc", now),
	}
}

func TestStaleOrMissingMetricsNeverEvict(t *testing.T) {
	for _, reason := range []string{policy.ZeroReasonStale, policy.ZeroReasonNoSamples} {
		t.Run(reason, func(t *testing.T) {
			h := newHarness(t, ModeOn)
			h.pods["n1"] = fourBatchPods(h.clock.Now())
			for i := 0; i < 10; i++ {
				h.cycle(0, reason)
				if n := h.evictionCalls(); n != 0 {
					t.Fatalf("cycle %d on %s data: %d eviction calls, want none", i, reason, n)
				}
			}
			if g := testutil.ToFloat64(h.c.m.overRoom); g != 0 {
				t.Errorf("nodes_over_room = %v on %s data, want 0", g, reason)
			}
			// Positive control: the same node on fresh data is evicted
			// once the grace has passed, so the look above could see it.
			for i := 0; i < 3; i++ {
				h.cycle(0, "")
			}
			if h.evictionCalls() == 0 {
				t.Fatal("control: fresh data at room 0 evicted nothing after the grace")
			}
		})
	}
}

// A regular pod without samples yet counts at its request: that lowers the
// room for placement, but it is not a measurement and must not evict.
func TestARoomLoweredByUnmeasuredRequestsNeverEvicts(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	unmeasured := policy.Result{Resources: reclaimable.Resources{CPUMilli: 0, MemoryBytes: 64 << 30}}
	unmeasured.Explanation.CPU.Terms = []reclaimable.Term{{Name: policy.TermUnmeasuredRequests, Op: reclaimable.OpSubtract, Value: 2000}}
	for i := 0; i < 10; i++ {
		h.c.Observe("n1", unmeasured, h.held("n1"))
		h.c.Act(context.Background())
		h.clock.Step(period)
	}
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("%d eviction calls on a room lowered by unmeasured requests", n)
	}
	// Positive control: the same room once every pod is measured.
	unmeasured.Explanation.CPU.Terms[0].Value = 0
	for i := 0; i < 3; i++ {
		h.c.Observe("n1", unmeasured, h.held("n1"))
		h.c.Act(context.Background())
		h.clock.Step(period)
	}
	if h.evictionCalls() == 0 {
		t.Fatal("control: a measured room of 0 evicted nothing after the grace")
	}
}

func TestGraceMustPassOnFreshDataBeforeEvicting(t *testing.T) {
	h := newHarness(t, ModeOn) // grace: two periods
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	h.cycle(0, "") // over since now
	h.cycle(0, "") // one period over
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("evicted within the grace: %d calls", n)
	}
	// A stale cycle restarts the clock: stale time never counts.
	h.cycle(0, policy.ZeroReasonStale)
	h.cycle(0, "")
	h.cycle(0, "")
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("evicted although the over-room run was broken by stale data: %d calls", n)
	}
	h.cycle(0, "") // two periods over
	if n := h.evictionCalls(); n == 0 {
		t.Fatal("nothing evicted two periods (the grace) after the node went over its room")
	}
}

func TestEvictsOnlyReclaimedPodsLowestPriorityThenYoungestUntilHeldFits(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	for i := 0; i < 3; i++ {
		h.cycle(2000, "")
	}
	if want := []string{"batch/low-young", "batch/low-old"}; !slices.Equal(h.evicted, want) {
		t.Fatalf("evicted %v, want %v (held 4000m, room 2000m)", h.evicted, want)
	}
	// The evicted pods are leaving: later cycles evict nothing more.
	for i := 0; i < 5; i++ {
		h.cycle(2000, "")
	}
	if len(h.evicted) != 2 {
		t.Errorf("evicted %v after the node fit its room, want only the first two", h.evicted)
	}
	// Room 0: every reclaimed pod goes, the regular one never.
	for i := 0; i < 5; i++ {
		h.cycle(0, "")
	}
	if want := []string{"batch/low-young", "batch/low-old", "batch/mid", "batch/high-old"}; !slices.Equal(h.evicted, want) {
		t.Errorf("at room 0 evicted %v, want %v", h.evicted, want)
	}
	if got := testutil.ToFloat64(h.c.m.evictions.WithLabelValues("on", "over-room-cpu")); got != 4 {
		t.Errorf("evictions_total{mode=on,reason=over-room-cpu} = %v, want 4", got)
	}
}

func TestEveryEvictionRecordsAnEventOnThePodAndTheNode(t *testing.T) {
	h := newHarness(t, ModeOn)
	now := h.clock.Now()
	h.pods["n1"] = []*corev1.Pod{reclaimedPod("a", 0, time.Minute, now, 2000), reclaimedPod("b", 0, time.Hour, now, 2000)}
	for i := 0; i < 3; i++ {
		h.cycle(0, "")
	}
	got := h.drainEvents()
	want := []string{
		"Warning ReclaimedPodEvicted room 0m cpu, held 4000m; evicted to free 2000m",
		"Warning ReclaimedPodEvicted room 0m cpu, held 4000m; evicted batch/a to free 2000m",
		"Warning ReclaimedPodEvicted room 0m cpu, held 4000m; evicted to free 2000m",
		"Warning ReclaimedPodEvicted room 0m cpu, held 4000m; evicted batch/b to free 2000m",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAPodDisruptionBudgetRefusalIsReportedRetriedLaterAndNeverBypassed(t *testing.T) {
	h := newHarness(t, ModeOn)
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	for _, p := range h.pods["n1"] {
		if p.Namespace == "batch" {
			h.refuse["batch/"+p.Name] = true
		}
	}
	const cycles = 30
	for i := 0; i < cycles; i++ {
		before := h.evictionCalls()
		h.cycle(0, "")
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
	ev := h.drainEvents()
	var podEv, nodeEv int
	for _, e := range ev {
		switch {
		case strings.HasPrefix(e, "Warning ReclaimedPodEvictionBlocked room 0m cpu, held 4000m; eviction to free 1000m refused by a PodDisruptionBudget"):
			podEv++
		case strings.HasPrefix(e, "Warning ReclaimedPodEvictionBlocked room 0m cpu, held 4000m; eviction of batch/"):
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
		h.cycle(0, "")
	}
	if len(h.evicted) != 4 {
		t.Errorf("evicted %v once the budget allowed it, want the 4 batch pods", h.evicted)
	}
}

func TestDryRunCountsAndRecordsEventsButEvictsNothing(t *testing.T) {
	h := newHarness(t, ModeDryRun)
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	for i := 0; i < 3; i++ {
		h.cycle(2000, "")
	}
	if n := h.evictionCalls(); n != 0 {
		t.Fatalf("dry-run made %d eviction calls", n)
	}
	if got := h.evictions("dry-run"); got != 2 {
		t.Errorf("evictions_total{mode=dry-run} = %v, want 2 (what on would evict)", got)
	}
	ev := h.drainEvents()
	want := []string{
		"Normal ReclaimedPodEvictionDryRun room 2000m cpu, held 4000m; would evict to free 1000m (--eviction=dry-run)",
		"Normal ReclaimedPodEvictionDryRun room 2000m cpu, held 4000m; would evict batch/low-young to free 1000m (--eviction=dry-run)",
		"Normal ReclaimedPodEvictionDryRun room 2000m cpu, held 4000m; would evict to free 1000m (--eviction=dry-run)",
		"Normal ReclaimedPodEvictionDryRun room 2000m cpu, held 4000m; would evict batch/low-old to free 1000m (--eviction=dry-run)",
	}
	if !slices.Equal(ev, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
	// The next cycle, within the grace, does not report the same pods again.
	h.cycle(2000, "")
	if got := h.evictions("dry-run"); got != 2 {
		t.Errorf("dry-run reported again within the grace: evictions_total = %v", got)
	}
}

func TestOffEvictsNothingButStillCountsNodesOverRoom(t *testing.T) {
	h := newHarness(t, ModeOff)
	h.pods["n1"] = fourBatchPods(h.clock.Now())
	for i := 0; i < 5; i++ {
		h.cycle(0, "")
	}
	if n, ev := h.evictionCalls(), h.drainEvents(); n != 0 || len(ev) != 0 {
		t.Errorf("off: %d eviction calls, events %v", n, ev)
	}
	if g := testutil.ToFloat64(h.c.m.overRoom); g != 1 {
		t.Errorf("nodes_over_room = %v, want 1", g)
	}
	h.cycle(8000, "")
	if g := testutil.ToFloat64(h.c.m.overRoom); g != 0 {
		t.Errorf("nodes_over_room = %v once the room covers what is held, want 0", g)
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
			h.pods["n1"] = fourBatchPods(h.clock.Now())
			var perCycle []int
			for i := 0; i < 7; i++ {
				before := len(h.evicted)
				h.cycle(0, "")
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

func TestEventTextIsReadable(t *testing.T) {
	plan := Plan{Room: res(0, 1684432486), Held: res(6000, 12*gi)}
	v := Candidate{Reclaimed: res(2000, 4*gi)}
	if got, want := overText(plan)+"; evicted to free "+freeText(plan, v),
		"room 0m cpu, held 6000m; room 1606Mi memory, held 12Gi; evicted to free 2000m cpu, 4Gi memory"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	plan = Plan{Room: res(0, 64*gi), Held: res(4000, gi)}
	if got, want := overText(plan)+"; evicted to free "+freeText(plan, v), "room 0m cpu, held 4000m; evicted to free 2000m"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if got := overReason(plan); got != "over-room-cpu" {
		t.Errorf("reason %q, want over-room-cpu", got)
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
	if d.Mode != ModeDryRun {
		t.Errorf("default mode %q, want dry-run (docs/design.md says why)", d.Mode)
	}
}
