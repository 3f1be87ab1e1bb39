package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// reclaimedPod asks cpuMilli/memBytes of reclaimed resources (requests ==
// limits) and may only run on nodes labelled group=<group>. It carries the
// native limits the pod webhook would set (no pod webhook runs here), as
// the extender's --require-enforced demands.
func reclaimedPod(ns, name, group string, cpuMilli, memBytes int64) *corev1.Pod {
	return framework.BatchPod(ns, name).NodeSelector("group", group).Reclaimed(cpuMilli, memBytes).Enforced().Obj()
}

// bareReclaimedPod is reclaimedPod as created with no pod webhook
// configured: reclaimed requests only, no native limits.
func bareReclaimedPod(ns, name, group string, cpuMilli, memBytes int64) *corev1.Pod {
	return framework.BatchPod(ns, name).NodeSelector("group", group).Reclaimed(cpuMilli, memBytes).Obj()
}

// controlPod is a regular pod for nodes labelled group=<group>: the
// scheduler places it without the extender, so seeing it bound proves that
// scheduling goes on where reclaimed pods are expected not to bind.
func controlPod(ns, name, group string) *corev1.Pod {
	return framework.ServicePod(ns, name).NodeSelector("group", group).Req("10m", "16Mi").Obj()
}

func podNode(t *testing.T, c *cluster.Cluster, ns, name string, timeout time.Duration) string {
	t.Helper()
	var node string
	framework.Poll(timeout, 200*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			node = p.Spec.NodeName
		}
		return node != ""
	})
	return node
}

// binpackProfile is TestExtender's profile with binpack scoring.
const binpackProfile = "kube-reclaim-binpack"

func TestExtender(t *testing.T) {
	ctx := context.Background()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Pods take the default profile unless they name the shipped one, or
	// the same with binpack scoring.
	profiles := []configv1.KubeSchedulerProfile{extender.DefaultProfile(corev1.DefaultSchedulerName)}
	for _, pr := range []struct{ name, strategy string }{{extender.SchedulerName, extender.StrategySpread}, {binpackProfile, extender.StrategyBinpack}} {
		p, err := extender.ReclaimedProfile(pr.name, reclaimable.DefaultDomain, pr.strategy)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	schedCfg := schedulerConfigFor(t, url, profiles...)
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, SchedulerConfig: schedCfg})
	extArgs := func(strategy string, extra ...string) []string {
		return append([]string{fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--strategy=" + strategy, "--publisher-lease-name=",
			"--scheduler-name=" + corev1.DefaultSchedulerName, "--scheduler-name=" + extender.SchedulerName, "--scheduler-name=" + binpackProfile}, extra...)
	}
	ext := framework.StartRole(t, c, "extender", "extender", extArgs("spread")...)
	room := map[string]reclaimable.Resources{}
	const gib = int64(1 << 30)
	annotate := func(node string, cpu, mem int64, written time.Time) {
		framework.SetAnnotation(t, c, node, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: written})
		room[node] = reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	addGroup := func(group string, n int) []string {
		nodes := framework.AddReadyNodes(t, c, n, cluster.NodeSpec{NamePrefix: group, Labels: map[string]string{"group": group}}, time.Minute)
		return nodes
	}
	// Wait until the extender's informers have seen n annotated nodes.
	waitCached := func(n float64) {
		if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool { return ext.Metric(t, "kube_reclaim_extender_cached_nodes") >= n }); !ok {
			t.Fatalf("extender caches %v nodes, want %v", ext.Metric(t, "kube_reclaim_extender_cached_nodes"), n)
		}
	}

	t.Run("malformed bodies answer 400 with a clear message; an empty NodeNames list answers an empty result", func(t *testing.T) {
		for _, verb := range []string{"filter", "prioritize", "bind"} {
			resp, err := http.Post(url+"/"+verb, "application/json", strings.NewReader("{not json"))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(strings.ToLower(body), "malformed") {
				t.Errorf("%s: %d %q, want 400 saying the body is malformed", verb, resp.StatusCode, body)
			}
		}
		args, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: reclaimedPod("default", "x", "none", 1000, gib), NodeNames: &[]string{}})
		resp, err := http.Post(url+"/filter", "application/json", strings.NewReader(string(args)))
		if err != nil {
			t.Fatal(err)
		}
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal([]byte(readAll(resp)), &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("empty NodeNames: %d %v", resp.StatusCode, err)
		}
		if res.NodeNames == nil || len(*res.NodeNames) != 0 || len(res.FailedNodes) != 0 || res.Error != "" {
			t.Errorf("empty NodeNames: got %+v, want an empty result", res)
		}
	})

	// Three nodes with room in proportion 10 : 3 : 2 (pods ask 1 core, 1
	// GiB), published and in allocatable, as the node webhook keeps it.
	strategyNodes := addGroup("strategy", 3)
	for i, cores := range []int64{10, 3, 2} {
		annotate(strategyNodes[i], cores*1000, cores*gib, time.Now())
		framework.SetReclaimedStatus(t, c, strategyNodes[i], cores*1000, cores*gib)
	}
	framework.CreateNamespace(t, c, "strategy")
	waitCached(3)

	// The profiles score the nodes (kube-scheduler's NodeResourcesFit on
	// the reclaimed resources); the extender only filters and binds.
	t.Run("the shipped profile spreads pods to the node with the most room left", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			name := fmt.Sprintf("spread-%d", i)
			p := reclaimedPod("strategy", name, "strategy", 1000, gib)
			p.Spec.SchedulerName = extender.SchedulerName
			framework.CreatePod(t, c, p)
			if got := podNode(t, c, "strategy", name, time.Minute); got != strategyNodes[0] {
				t.Errorf("%s on %q, want %s (most room)", name, got, strategyNodes[0])
			}
		}
		framework.DeleteAllPods(t, c, "strategy")
	})

	t.Run("the binpack profile fills the node with the least room left first, up to its room", func(t *testing.T) {
		want := []string{strategyNodes[2], strategyNodes[2], strategyNodes[1]}
		for i, w := range want {
			name := fmt.Sprintf("binpack-%d", i)
			p := reclaimedPod("strategy", name, "strategy", 1000, gib)
			p.Spec.SchedulerName = binpackProfile
			framework.CreatePod(t, c, p)
			if got := podNode(t, c, "strategy", name, time.Minute); got != w {
				t.Errorf("%s on %q, want %s", name, got, w)
			}
		}
		framework.DeleteAllPods(t, c, "strategy")
	})

	t.Run("a pod too big for every node stays Pending and its event carries the per-node reasons", func(t *testing.T) {
		framework.CreatePod(t, c, reclaimedPod("strategy", "too-big", "strategy", 50000, gib))
		// The newest FailedScheduling event: right after the extender was
		// restarted, an attempt may have failed to reach it; a later one must
		// carry its reasons.
		var msg string
		// A scheduling attempt and the Event's asynchronous write.
		if _, ok := framework.Poll(time.Minute, 500*time.Millisecond, func() bool {
			msg = framework.SchedulingMessage(c, "strategy", "too-big")
			return strings.Contains(msg, "reclaimed-cpu: need 50000m")
		}); !ok {
			t.Fatalf("no FailedScheduling event carries the extender's reason; the newest says %q", msg)
		}
		t.Logf("FailedScheduling: %s", msg)
		if p, _ := c.Client.CoreV1().Pods("strategy").Get(ctx, "too-big", metav1.GetOptions{}); p.Spec.NodeName != "" {
			t.Errorf("too-big bound to %s", p.Spec.NodeName)
		}
		framework.DeleteAllPods(t, c, "strategy")
	})

	t.Run("a reclaimed pod created without the pod webhook's limits stays Pending with the reason; --require-enforced=false places it", func(t *testing.T) {
		framework.CreatePod(t, c, bareReclaimedPod("strategy", "bare", "strategy", 1000, gib))
		var msg string
		// A scheduling attempt and the Event's asynchronous write.
		if _, ok := framework.Poll(time.Minute, 500*time.Millisecond, func() bool {
			msg = framework.SchedulingMessage(c, "strategy", "bare")
			return strings.Contains(msg, "not enforced by kubelet limits")
		}); !ok {
			t.Fatalf("no FailedScheduling event says the pod is not enforced; the newest says %q", msg)
		}
		t.Logf("FailedScheduling: %s", msg)
		for _, want := range []string{`container "job": no explicit requests.cpu`, "no limits.memory (set it to its grant 1Gi)", "pod webhook"} {
			if !strings.Contains(msg, want) {
				t.Errorf("FailedScheduling message lacks %q", want)
			}
		}
		// It stays Pending at every look, while an enforced twin created at
		// the start of the window (the control) is placed on the same nodes.
		r := framework.ExpectAbsence(t, framework.Absence{Window: 5 * time.Second, Every: 500 * time.Millisecond,
			// A scheduling cycle through the extender can take longer than
			// the window on a busy machine: look until the twin is bound.
			ControlWithin: 30 * time.Second,
			Control: func() error {
				_, err := c.Client.CoreV1().Pods("strategy").Create(ctx, reclaimedPod("strategy", "enforced-twin", "strategy", 1000, gib), metav1.CreateOptions{})
				return err
			},
			Look: func(time.Duration) ([]string, bool) {
				st := framework.MustPods(t, c, "strategy")
				var v []string
				if n, ok := st.BoundTo["bare"]; ok {
					v = append(v, "bare bound to "+n)
				}
				_, seen := st.BoundTo["enforced-twin"]
				return v, seen
			}})
		t.Logf("bare Pending at all %d looks over 5s; the enforced twin bound %.1fs into the window", r.Looks, r.ControlSeen.Seconds())
		if got := ext.Metric(t, "kube_reclaim_extender_not_enforced_refusals_total"); got < 1 {
			t.Errorf("not_enforced_refusals_total = %v, want at least 1", got)
		}
		framework.DeleteAllPods(t, c, "strategy")

		if err := c.StopComponent("extender"); err != nil {
			t.Fatal(err)
		}
		ext = framework.StartRole(t, c, "extender", "extender", extArgs("spread", "--require-enforced=false")...)
		waitCached(3)
		framework.CreatePod(t, c, bareReclaimedPod("strategy", "bare-allowed", "strategy", 1000, gib))
		if got := podNode(t, c, "strategy", "bare-allowed", time.Minute); got == "" {
			t.Errorf("with --require-enforced=false the pod without limits was not placed; newest event: %q",
				framework.SchedulingMessage(c, "strategy", "bare-allowed"))
		}
		framework.DeleteAllPods(t, c, "strategy")
		if err := c.StopComponent("extender"); err != nil {
			t.Fatal(err)
		}
		ext = framework.StartRole(t, c, "extender", "extender", extArgs("spread")...)
	})

	// 20 nodes with room for 6 pods each (120 in all), plus one stale node
	// with plenty of room that must get nothing.
	burst := addGroup("burst", 21)
	for _, n := range burst[:20] {
		annotate(n, 6000, 8*gib, time.Now())
	}
	annotate(burst[20], 100000, 100*gib, time.Now().Add(-time.Hour))
	framework.CreateNamespace(t, c, "burst")
	waitCached(24)
	burstPods := func(round int) []*corev1.Pod {
		pods := make([]*corev1.Pod, 200)
		for i := range pods {
			pods[i] = reclaimedPod("burst", fmt.Sprintf("r%d-%d", round, i), "burst", 1000, gib)
		}
		return pods
	}
	// Burst pods are named r<round>-<i>; reclaimedBound counts them.
	reclaimedBound := func(st framework.PodState) int { return st.BoundWithPrefix("r") }
	// noMoreBinds looks every second for window: no node over its room and
	// at most limit burst pods bound. Its control is a regular pod created at
	// the start of the window, which the same looks must see bound.
	noMoreBinds := func(t *testing.T, control string, window time.Duration, limit int) framework.AbsenceReport {
		t.Helper()
		return framework.ExpectAbsence(t, framework.Absence{Window: window, Every: time.Second,
			// The control's bind can take longer than a short window on a
			// busy machine: look until it is bound.
			ControlWithin: max(window, 30*time.Second),
			Control: func() error {
				_, err := c.Client.CoreV1().Pods("burst").Create(ctx, controlPod("burst", control, "burst"), metav1.CreateOptions{})
				return err
			},
			Look: func(time.Duration) ([]string, bool) {
				st := framework.MustPods(t, c, "burst")
				v := st.Overbooked(room)
				if n := reclaimedBound(st); n > limit {
					v = append(v, fmt.Sprintf("%d burst pods bound, want at most %d", n, limit))
				}
				_, seen := st.BoundTo[control]
				return v, seen
			}})
	}
	// settle waits until 120 pods are bound, checking for over-booking at
	// every look, then checks for a while that nothing more gets bound.
	settle := func(t *testing.T, round int) {
		t.Helper()
		var bound int
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
			st := framework.MustPods(t, c, "burst")
			for _, o := range st.Overbooked(room) {
				t.Error(o)
			}
			bound = reclaimedBound(st)
			return bound >= 120 || t.Failed(), nil
		})
		if err != nil {
			t.Fatalf("only %d of 120 pods bound: %v", bound, err)
		}
		control := fmt.Sprintf("control-%d", round)
		r := noMoreBinds(t, control, 5*time.Second, 120)
		framework.DeletePod(t, c, "burst", control)
		st := framework.MustPods(t, c, "burst")
		if bound := reclaimedBound(st); bound != 120 {
			t.Errorf("%d pods bound, want exactly the room (120)", bound)
		}
		if st.Bookings[burst[20]].CPUMilli != 0 {
			t.Errorf("stale node %s got reclaimed pods", burst[20])
		}
		t.Logf("120 bound and no more in %d looks over 5s; the control pod bound %.1fs into the window", r.Looks, r.ControlSeen.Seconds())
	}

	t.Run("a burst of 200 pods onto room for 120 binds exactly the room, three times over", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			start := time.Now()
			framework.CreatePods(t, c, burstPods(round))
			settle(t, round)
			t.Logf("round %d: 120 bound in %s, 80 Pending, no node over-booked", round, time.Since(start).Round(100*time.Millisecond))
			framework.DeleteAllPods(t, c, "burst")
		}
	})

	t.Run("extender restarted mid-burst: no node over-booked and pending pods are placed once it is back", func(t *testing.T) {
		pods := burstPods(9)
		framework.CreatePods(t, c, pods[:100])
		if _, ok := framework.Poll(60*time.Second, 100*time.Millisecond, func() bool {
			return reclaimedBound(framework.MustPods(t, c, "burst")) >= 60
		}); !ok {
			t.Fatal("first half of the burst not scheduled")
		}
		if err := c.KillComponent("extender"); err != nil {
			t.Fatal(err)
		}
		atKill := reclaimedBound(framework.MustPods(t, c, "burst"))
		// The second half arrives while the extender is down: the scheduler
		// cannot place them (the extender is not ignorable), while it goes on
		// placing the regular control pod. Binds already in flight at the kill
		// may still land.
		framework.CreatePods(t, c, pods[100:])
		r := noMoreBinds(t, "control-down", 10*time.Second, atKill+5)
		whileDown := reclaimedBound(framework.MustPods(t, c, "burst"))
		t.Logf("extender down 10s: %d looks, at most %d burst pods bound (%d at the kill); the control pod bound %.1fs into the window",
			r.Looks, whileDown, atKill, r.ControlSeen.Seconds())
		framework.DeletePod(t, c, "burst", "control-down")
		ext = framework.StartRole(t, c, "extender", "extender", extArgs("spread")...)
		start := time.Now()
		settle(t, 9)
		t.Logf("%d bound at the kill, %d while down, 120 bound %s after the restart", atKill, whileDown, time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("on the kube-reclaim-scheduler profile a cycle asks about 100 of 400 feasible nodes, and pods still find the one node with room", func(t *testing.T) {
		framework.DeleteAllPods(t, c, "burst")
		sparse := addGroup("sparse", 400)
		roomy := sparse[237]
		annotate(roomy, 10000, 10*gib, time.Now())
		framework.CreateNamespace(t, c, "sparse")
		waitCached(float64(len(strategyNodes) + len(burst) + len(sparse)))
		// Filter calls by node names: up to 50 (the other groups' pods
		// carry at most 21), 51 to 100 (this profile's cycles), over 100
		// (what kube-scheduler's default would send here: 47 % of 424).
		filterCalls := func() (upTo50, upTo100, all float64) {
			bucket := func(le string) float64 {
				return ext.Metric(t, "kube_reclaim_extender_nodes_per_call_bucket", "verb", "filter", "le", le)
			}
			return bucket("50"), bucket("100"), bucket("+Inf")
		}
		b50, b100, bAll := filterCalls()
		for i := range 3 {
			p := reclaimedPod("sparse", fmt.Sprintf("sparse-%d", i), "sparse", 1000, gib)
			p.Spec.SchedulerName = extender.SchedulerName
			framework.CreatePod(t, c, p)
		}
		// kube-scheduler retries a pod the extender rejected on its next
		// cluster event (or its 5-minute flush of unschedulable pods), each
		// time from where its last cycle stopped, so a pod finds the one node
		// in a later window. Here no publisher runs: the roomy node's
		// annotation is written again every 5 s, as publisher writes are
		// the events a real cluster has. Without them the last pod to fail
		// after the last bind waits for the flush.
		placed := map[string]string{}
		lastWrite := time.Now()
		framework.Poll(2*time.Minute, 200*time.Millisecond, func() bool {
			for i := range 3 {
				name := fmt.Sprintf("sparse-%d", i)
				if p, err := c.Client.CoreV1().Pods("sparse").Get(context.Background(), name, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
					placed[name] = p.Spec.NodeName
				}
			}
			if len(placed) < 3 && time.Since(lastWrite) >= 5*time.Second {
				annotate(roomy, 10000, 10*gib, time.Now())
				lastWrite = time.Now()
			}
			return len(placed) == 3
		})
		for i := range 3 {
			if got := placed[fmt.Sprintf("sparse-%d", i)]; got != roomy {
				t.Errorf("sparse-%d on %q, want %s, the only node with room", i, got, roomy)
			}
		}
		a50, a100, aAll := filterCalls()
		profileCalls, overHundred := (a100-b100)-(a50-b50), (aAll-bAll)-(a100-b100)
		if profileCalls < 3 || overHundred != 0 {
			t.Errorf("filter calls during the placements: %v with 51-100 node names, %v with more; want at least 3 and none", profileCalls, overHundred)
		}
		t.Logf("3 pods placed on the one node with room of 400 in %v filter calls of 51-100 names", profileCalls)
	})
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
