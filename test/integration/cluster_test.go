package integration

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestLocalCluster checks the foundation every other integration test stands
// on, against the real components: startup time, kwok nodes that behave like
// kubelets, metrics that follow the usage a test sets, a scheduler that binds,
// scale, and a Stop that leaves nothing behind.
func TestLocalCluster(t *testing.T) {
	ctx := context.Background()
	buildStart := time.Now()
	if _, err := cluster.EnsureBinaries(ctx, testLog{t}); err != nil {
		t.Fatal(err)
	}
	t.Logf("binaries ready after %s (cold cache builds them here)", time.Since(buildStart).Round(time.Millisecond))

	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				t.Logf("component logs:%s", c.LogTails())
			}
			c.Stop()
		}
	})
	ready := time.Since(start)
	t.Logf("cluster ready in %s from a warm cache", ready.Round(time.Millisecond))
	if ready > 20*time.Second {
		t.Errorf("cluster took %s to become ready, want < 20s", ready)
	}

	spec := cluster.NodeSpec{NamePrefix: "node", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}
	nodes, err := c.AddNodes(ctx, 3, spec)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("kwok nodes become Ready, lose the not-ready taint and heartbeat", func(t *testing.T) {
		if err := c.WaitNodesReady(ctx, nodes, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lastBeat := map[string]time.Time{}
		for i := range list.Items {
			lastBeat[list.Items[i].Name] = framework.ReadyHeartbeat(&list.Items[i])
		}
		// Count the new resourceVersions that carry a new Ready heartbeat time:
		// those come from kwok's status PATCH, not from the controller-manager.
		w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		advances := map[string]int{}
		// Two heartbeats at 10s plus up to 5s of jitter take up to 30s;
		// kwok's timers slip on a busy machine. The loop ends as soon as
		// every node has two.
		const beatWindow = 60 * time.Second
		deadline := time.After(beatWindow)
	loop:
		for {
			select {
			case ev := <-w.ResultChan():
				if n, ok := ev.Object.(*corev1.Node); ok && contains(nodes, n.Name) {
					if hb := framework.ReadyHeartbeat(n); hb.After(lastBeat[n.Name]) {
						advances[n.Name]++
						lastBeat[n.Name] = hb
					}
				}
				done := true
				for _, n := range nodes {
					done = done && advances[n] >= 2
				}
				if done {
					break loop
				}
			case <-deadline:
				break loop
			}
		}
		for _, n := range nodes {
			if advances[n] < 2 {
				t.Errorf("node %s: %d heartbeats (new resourceVersion with a new Ready heartbeat time) in %s, want >= 2", n, advances[n], beatWindow)
			}
		}
		t.Logf("heartbeats seen within %s: %v", beatWindow, advances)
	})

	t.Run("metrics.k8s.io reports the node usage set through kwok", func(t *testing.T) {
		// Node A: 2 cores / 4 GiB, node B: 6 cores / 1 GiB.
		setUsage := func(node, pod, cpu, mem string) {
			t.Helper()
			createPod(t, c, "default", pod, node)
			if err := c.SetPodUsage(ctx, "default", pod, cpu, mem); err != nil {
				t.Fatal(err)
			}
		}
		setUsage(nodes[0], "usage-a", "2", "4Gi")
		setUsage(nodes[1], "usage-b", "6", "1Gi")
		start := time.Now()
		// A pod's usage shows after kwok, a metrics-server scrape (15s) and
		// its first rate: about a minute, more on a busy machine.
		waitNodeUsage(t, c, map[string][2]float64{nodes[0]: {2000, 4 << 30}, nodes[1]: {6000, 1 << 30}}, 3*time.Minute)
		t.Logf("metrics-server reported the usage after %s", time.Since(start).Round(time.Second))

		if err := c.SetPodUsage(ctx, "default", "usage-a", "5", "2Gi"); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		waitNodeUsage(t, c, map[string][2]float64{nodes[0]: {5000, 2 << 30}}, 3*time.Minute)
		t.Logf("changed usage reported after %s", time.Since(start).Round(time.Second))
	})

	t.Run("kube-scheduler binds a plain pod to a kwok node", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		}
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var node string
		// A scheduling cycle, the bind and kwok's Running, on a busy machine.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors
			}
			node = p.Spec.NodeName
			return node != "" && p.Status.Phase == corev1.PodRunning, nil
		})
		if err != nil {
			t.Fatalf("pod not bound and running: %v", err)
		}
		if !contains(nodes, node) {
			t.Fatalf("pod bound to %q, not a kwok node %v", node, nodes)
		}
	})

	t.Run("200 nodes added concurrently become Ready", func(t *testing.T) {
		start := time.Now()
		many, err := c.AddNodes(ctx, 200, cluster.NodeSpec{NamePrefix: "bulk"})
		if err != nil {
			t.Fatal(err)
		}
		created := time.Since(start)
		// kwok initializes 200 nodes while the apiserver admits them all;
		// the time it took is logged below.
		if err := c.WaitNodesReady(ctx, many, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("200 nodes created in %s, all Ready after %s", created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})

	t.Run("Stop leaves no started process alive", func(t *testing.T) {
		pids := c.StartedPIDs()
		if len(pids) < 6 {
			t.Fatalf("expected at least 6 started processes, got %v", pids)
		}
		dir := c.Dir()
		c.Stop()
		stopped = true
		for _, pid := range pids {
			if cluster.PIDAlive(pid) {
				t.Errorf("pid %d still alive after Stop", pid)
			}
		}
		if _, err := statDir(dir); err == nil {
			t.Errorf("cluster directory %s still exists after Stop", dir)
		}
	})
}

func createPod(t *testing.T, c *cluster.Cluster, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitNodeUsage waits until metrics.k8s.io reports each node's usage within
// 10 % of want ({cpu millicores, memory bytes}), allowing for the node baseline.
func waitNodeUsage(t *testing.T, c *cluster.Cluster, want map[string][2]float64, timeout time.Duration) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ok := true
		last = ""
		for node, w := range want {
			m, err := c.Metrics.MetricsV1beta1().NodeMetricses().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				last += fmt.Sprintf("%s: %v; ", node, err)
				ok = false
				continue
			}
			cpu := float64(m.Usage.Cpu().MilliValue())
			mem := float64(m.Usage.Memory().Value())
			last += fmt.Sprintf("%s: cpu=%.0fm mem=%.0f; ", node, cpu, mem)
			if math.Abs(cpu-w[0]) > 0.1*w[0] || math.Abs(mem-w[1]) > 0.1*w[1] {
				ok = false
			}
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("node usage not reported within %s: last seen %s want %v", timeout, last, want)
	}
}
