package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// reclaimedPod asks cpuMilli/memBytes of reclaimed resources (requests ==
// limits) and may only run on nodes labelled group=<group>.
func reclaimedPod(ns, name, group string, cpuMilli, memBytes int64) *corev1.Pod {
	r := corev1.ResourceList{
		names.CPU:    *resource.NewQuantity(cpuMilli, resource.DecimalSI),
		names.Memory: *resource.NewQuantity(memBytes, resource.BinarySI),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "batch"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"group": group},
			Containers:   []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}},
		},
	}
}

// nodeBookings returns, per node, the sum of reclaimed requests of the
// non-terminal pods bound to it in namespace ns, and how many pods are bound.
func nodeBookings(t *testing.T, c *cluster.Cluster, ns string) (map[string]reclaimable.Resources, int) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reclaimable.Resources{}
	bound := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		r, _ := names.PodRequest(p)
		out[p.Spec.NodeName] = out[p.Spec.NodeName].Add(r)
		bound++
	}
	return out, bound
}

// assertNotOverbooked fails when any node holds more than room.
func assertNotOverbooked(t *testing.T, bookings map[string]reclaimable.Resources, room map[string]reclaimable.Resources) {
	t.Helper()
	for node, b := range bookings {
		r := room[node]
		if b.CPUMilli > r.CPUMilli || b.MemoryBytes > r.MemoryBytes {
			t.Errorf("node %s over-booked: %d m / %d bytes bound, room %d m / %d bytes", node, b.CPUMilli, b.MemoryBytes, r.CPUMilli, r.MemoryBytes)
		}
	}
}

func deleteAllPods(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := pollUntil(60*time.Second, 500*time.Millisecond, func() bool {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}); !ok {
		t.Fatal("pods not deleted")
	}
}

func createPodsConcurrently(t *testing.T, c *cluster.Cluster, pods []*corev1.Pod) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(pods))
	sem := make(chan struct{}, 50)
	for _, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func podNode(t *testing.T, c *cluster.Cluster, ns, name string, timeout time.Duration) string {
	t.Helper()
	var node string
	pollUntil(timeout, 200*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			node = p.Spec.NodeName
		}
		return node != ""
	})
	return node
}

func TestExtender(t *testing.T) {
	ctx := context.Background()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	schedCfg, err := extender.ExtenderConfigYAML(url, reclaimable.DefaultDomain)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, SchedulerConfig: schedCfg})
	extArgs := func(strategy string) []string {
		return []string{fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--strategy=" + strategy, "--publisher-lease-name="}
	}
	ext := startRole(t, c, "extender", "extender", extArgs("spread")...)
	room := map[string]reclaimable.Resources{}
	const gib = int64(1 << 30)
	annotate := func(node string, cpu, mem int64, written time.Time) {
		setAnnotation(t, c, node, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: written})
		room[node] = reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	addGroup := func(group string, n int) []string {
		nodes, err := c.AddNodes(ctx, n, cluster.NodeSpec{NamePrefix: group, Labels: map[string]string{"group": group}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitNodesReady(ctx, nodes, time.Minute); err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	// Wait until the extender's informers have seen n annotated nodes.
	waitCached := func(n float64) {
		if _, ok := pollUntil(30*time.Second, 200*time.Millisecond, func() bool { return ext.metric(t, "kube_reclaim_extender_cached_nodes") >= n }); !ok {
			t.Fatalf("extender caches %v nodes, want %v", ext.metric(t, "kube_reclaim_extender_cached_nodes"), n)
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

	// Three nodes with room in proportion 10 : 3 : 2 (pods ask 1 core, 1 GiB).
	strategyNodes := addGroup("strategy", 3)
	annotate(strategyNodes[0], 10000, 10*gib, time.Now())
	annotate(strategyNodes[1], 3000, 3*gib, time.Now())
	annotate(strategyNodes[2], 2000, 2*gib, time.Now())
	mustNamespace(t, c, "strategy")
	waitCached(3)

	t.Run("spread places pods on the node with the most room left", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			name := fmt.Sprintf("spread-%d", i)
			mustCreatePod(t, c, reclaimedPod("strategy", name, "strategy", 1000, gib))
			if got := podNode(t, c, "strategy", name, 30*time.Second); got != strategyNodes[0] {
				t.Errorf("%s on %q, want %s (most room)", name, got, strategyNodes[0])
			}
		}
		deleteAllPods(t, c, "strategy")
	})

	t.Run("binpack fills the node with the least room left first", func(t *testing.T) {
		if err := c.StopComponent("extender"); err != nil {
			t.Fatal(err)
		}
		ext = startRole(t, c, "extender", "extender", extArgs("binpack")...)
		waitCached(3)
		want := []string{strategyNodes[2], strategyNodes[2], strategyNodes[1]}
		for i, w := range want {
			name := fmt.Sprintf("binpack-%d", i)
			mustCreatePod(t, c, reclaimedPod("strategy", name, "strategy", 1000, gib))
			if got := podNode(t, c, "strategy", name, 30*time.Second); got != w {
				t.Errorf("%s on %q, want %s", name, got, w)
			}
		}
		deleteAllPods(t, c, "strategy")
		if err := c.StopComponent("extender"); err != nil {
			t.Fatal(err)
		}
		ext = startRole(t, c, "extender", "extender", extArgs("spread")...)
	})

	t.Run("a pod too big for every node stays Pending and its event carries the per-node reasons", func(t *testing.T) {
		mustCreatePod(t, c, reclaimedPod("strategy", "too-big", "strategy", 50000, gib))
		var msg string
		if _, ok := pollUntil(30*time.Second, 500*time.Millisecond, func() bool {
			evs, err := c.Client.CoreV1().Events("strategy").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=too-big"})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "FailedScheduling" {
					msg = e.Message
					return true
				}
			}
			return false
		}); !ok {
			t.Fatal("no FailedScheduling event")
		}
		t.Logf("FailedScheduling: %s", msg)
		if !strings.Contains(msg, "reclaimed-cpu: need 50000m") {
			t.Errorf("event does not carry the extender's reason: %q", msg)
		}
		if p, _ := c.Client.CoreV1().Pods("strategy").Get(ctx, "too-big", metav1.GetOptions{}); p.Spec.NodeName != "" {
			t.Errorf("too-big bound to %s", p.Spec.NodeName)
		}
		deleteAllPods(t, c, "strategy")
	})

	// 20 nodes with room for 6 pods each (120 in all), plus one stale node
	// with plenty of room that must get nothing.
	burst := addGroup("burst", 21)
	for _, n := range burst[:20] {
		annotate(n, 6000, 8*gib, time.Now())
	}
	annotate(burst[20], 100000, 100*gib, time.Now().Add(-time.Hour))
	mustNamespace(t, c, "burst")
	waitCached(24)
	burstPods := func(round int) []*corev1.Pod {
		pods := make([]*corev1.Pod, 200)
		for i := range pods {
			pods[i] = reclaimedPod("burst", fmt.Sprintf("r%d-%d", round, i), "burst", 1000, gib)
		}
		return pods
	}
	// settle waits until 120 pods are bound, checking for over-booking at
	// every look, then checks that nothing more gets bound.
	settle := func(t *testing.T) {
		t.Helper()
		var bound int
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
			var b map[string]reclaimable.Resources
			b, bound = nodeBookings(t, c, "burst")
			assertNotOverbooked(t, b, room)
			return bound >= 120 || t.Failed(), nil
		})
		if err != nil {
			t.Fatalf("only %d of 120 pods bound: %v", bound, err)
		}
		time.Sleep(5 * time.Second)
		b, bound := nodeBookings(t, c, "burst")
		assertNotOverbooked(t, b, room)
		if bound != 120 {
			t.Errorf("%d pods bound, want exactly the room (120)", bound)
		}
		if b[burst[20]].CPUMilli != 0 {
			t.Errorf("stale node %s got reclaimed pods", burst[20])
		}
	}

	t.Run("a burst of 200 pods onto room for 120 binds exactly the room, three times over", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			start := time.Now()
			createPodsConcurrently(t, c, burstPods(round))
			settle(t)
			t.Logf("round %d: 120 bound in %s, 80 Pending, no node over-booked", round, time.Since(start).Round(100*time.Millisecond))
			deleteAllPods(t, c, "burst")
		}
	})

	t.Run("extender restarted mid-burst: no node over-booked and pending pods are placed once it is back", func(t *testing.T) {
		pods := burstPods(9)
		createPodsConcurrently(t, c, pods[:100])
		if _, ok := pollUntil(60*time.Second, 100*time.Millisecond, func() bool { _, n := nodeBookings(t, c, "burst"); return n >= 60 }); !ok {
			t.Fatal("first half of the burst not scheduled")
		}
		if err := c.KillComponent("extender"); err != nil {
			t.Fatal(err)
		}
		_, atKill := nodeBookings(t, c, "burst")
		// The second half arrives while the extender is down: the scheduler
		// cannot place them (the extender is not ignorable).
		createPodsConcurrently(t, c, pods[100:])
		time.Sleep(10 * time.Second)
		b, whileDown := nodeBookings(t, c, "burst")
		assertNotOverbooked(t, b, room)
		// Binds already in flight at the kill may still land.
		if whileDown > atKill+5 {
			t.Errorf("%d pods bound while the extender was down (from %d at the kill)", whileDown, atKill)
		}
		ext = startRole(t, c, "extender", "extender", extArgs("spread")...)
		start := time.Now()
		settle(t)
		t.Logf("%d bound at the kill, %d while down, 120 bound %s after the restart", atKill, whileDown, time.Since(start).Round(100*time.Millisecond))
	})
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
