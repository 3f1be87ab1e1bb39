package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// pluginSchedulerConfig writes deploy/plugin-scheduler's configuration as
// the shipped file says into file in the cluster's directory, with the
// cluster's admin kubeconfig and, unless leaderElect, no leader election. It
// returns the file and the profile's name.
func pluginSchedulerConfig(t *testing.T, c *cluster.Cluster, file string, leaderElect bool) (string, string) {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "plugin-scheduler", "kube-reclaim-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) != 1 || cfg["extenders"] != nil {
		t.Fatalf("deploy/plugin-scheduler: %d profiles and extenders %v; want one profile and no extender", len(profiles), cfg["extenders"])
	}
	name, _ := profiles[0].(map[string]any)["schedulerName"].(string)
	if !leaderElect {
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": c.Kubeconfig()}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(c.Dir(), file)
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, name
}

// The plugin topology: kube-reclaim-scheduler (kube-scheduler with the
// placement plugin, as deploy/plugin-scheduler runs it) places reclaimed
// pods only where the published room fits, never over-books a node under a
// burst, and a pod it cannot place shows the placement core's messages.
func TestPluginScheduler(t *testing.T) {
	ctx := context.Background()
	bin, err := cluster.EnsurePluginScheduler(ctx, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	const gib = int64(1 << 30)
	// roomy publishes room; decoy has more reclaimed allocatable but
	// publishes none: only the plugin keeps pods off it.
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "plug", Labels: map[string]string{"group": "plug"}}, time.Minute)
	roomy, decoy := nodes[0], nodes[1]
	framework.SetAnnotation(t, c, roomy, reclaimable.Annotation{CPUMilli: 4000, MemoryBytes: 4 * gib, Policy: "usage", WriteTime: time.Now()})
	framework.SetReclaimedStatus(t, c, roomy, 4000, 4*gib)
	framework.SetReclaimedStatus(t, c, decoy, 64000, 64*gib)
	// The burst's nodes: room for two 1000m pods each (2500m published).
	burstNodes := framework.AddReadyNodes(t, c, 4, cluster.NodeSpec{NamePrefix: "plugburst", Labels: map[string]string{"group": "plugburst"}}, time.Minute)
	const burstRoom, burstCPU = int64(2500), int64(1000)
	for _, n := range burstNodes {
		framework.SetAnnotation(t, c, n, reclaimable.Annotation{CPUMilli: burstRoom, MemoryBytes: 16 * gib, Policy: "usage", WriteTime: time.Now()})
		framework.SetReclaimedStatus(t, c, n, burstRoom, 16*gib)
	}
	framework.RenewPublisherLease(t, c)

	cfgFile, profile := pluginSchedulerConfig(t, c, "kube-reclaim-scheduler.yaml", false)
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	const procName = "kube-reclaim-scheduler"
	started := time.Now()
	if err := c.StartProcess(procName, bin, "--config="+cfgFile,
		"--authentication-kubeconfig="+c.Kubeconfig(), "--authorization-kubeconfig="+c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)); err != nil {
		t.Fatal(err)
	}
	const ns = "plug"
	framework.CreateNamespace(t, c, ns)
	profilePod := func(name, group string, cpuMilli, memBytes int64) *corev1.Pod {
		p := reclaimedPod(ns, name, group, cpuMilli, memBytes)
		p.Spec.SchedulerName = profile
		return p
	}

	t.Run("a reclaimed pod is placed on the node with published room, not on one with only allocatable", func(t *testing.T) {
		framework.CreatePod(t, c, profilePod("placed", "plug", 1000, gib))
		if got := podNode(t, c, ns, "placed", 2*time.Minute); got != roomy {
			t.Fatalf("placed on %q, want %s, the only node with published room; newest event %q\n%s",
				got, roomy, framework.SchedulingMessage(c, ns, "placed"), c.Process(procName).Tail(4096))
		}
		t.Logf("first reclaimed pod bound %.1fs after the scheduler started", time.Since(started).Seconds())
	})

	t.Run("a pod larger than any node's room stays Pending with the placement core's reasons, while one that fits is placed", func(t *testing.T) {
		expectPendingWhileAFitIsPlaced(t, c, ns, roomy, func(name string, cpuMilli int64) *corev1.Pod { return profilePod(name, "plug", cpuMilli, gib) },
			"reclaimed-cpu: need 100000m, free 3000m", "no reclaimed capacity: node has no reclaimable annotation")
	})

	t.Run("a burst of reclaimed pods never over-books a node and fills the room", func(t *testing.T) {
		const bns, n = "plugburst", 40
		framework.CreateNamespace(t, c, bns)
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			p := reclaimedPod(bns, fmt.Sprintf("burst-%02d", i), "plugburst", burstCPU, gib)
			p.Spec.SchedulerName = profile
			pods[i] = p
		}
		fit := len(burstNodes) * int(burstRoom/burstCPU)
		// The pods are created at once, concurrently, while the looks run.
		start := time.Now()
		created := make(chan error, n)
		for _, p := range pods {
			go func() {
				_, err := c.Client.CoreV1().Pods(bns).Create(ctx, p, metav1.CreateOptions{})
				created <- err
			}()
		}
		// Every look over the whole burst: no node holds more than it
		// published. The positive control: the room fills, every pod that
		// fits bound.
		var looks, over int
		var last framework.PodState
		took, ok := framework.Poll(2*time.Minute, 50*time.Millisecond, func() bool {
			st := framework.MustPods(t, c, bns)
			looks++
			for node, b := range st.Bookings {
				if b.CPUMilli > burstRoom {
					over++
					t.Errorf("look %d (%.1fs): node %s holds %dm of reclaimed CPU, %dm published", looks, time.Since(start).Seconds(), node, b.CPUMilli, burstRoom)
				}
			}
			last = st
			return len(st.BoundTo) >= fit && st.Total == n
		})
		for range pods {
			if err := <-created; err != nil {
				t.Errorf("creating a burst pod: %v", err)
			}
		}
		if !ok {
			t.Fatalf("%d of the %d pods that fit bound within %s", len(last.BoundTo), fit, took)
		}
		t.Logf("%d pods bound (room for %d) %.1fs after the burst of %d began; %d looks, %d found a node over-booked", len(last.BoundTo), fit, took.Seconds(), n, looks, over)
		// Then the rest stays Pending, sampled throughout, and each says why.
		framework.ExpectAbsence(t, framework.Absence{Window: 5 * time.Second, Every: 250 * time.Millisecond,
			Look: func(time.Duration) ([]string, bool) {
				st := framework.MustPods(t, c, bns)
				var v []string
				if len(st.BoundTo) > fit {
					v = append(v, fmt.Sprintf("%d pods bound, room for %d", len(st.BoundTo), fit))
				}
				for node, b := range st.Bookings {
					if b.CPUMilli > burstRoom {
						v = append(v, fmt.Sprintf("node %s holds %dm, %dm published", node, b.CPUMilli, burstRoom))
					}
				}
				return v, len(st.BoundTo) == fit
			}})
		if len(last.Pending) == 0 {
			t.Fatal("no pod of the burst is Pending, but it asked more than the room")
		}
		pending := last.Pending[0]
		var msg string
		if _, ok := framework.Poll(time.Minute, 500*time.Millisecond, func() bool {
			msg = framework.SchedulingMessage(c, bns, pending)
			return strings.Contains(msg, "reclaimed-cpu: need 1000m, free 500m")
		}); !ok {
			t.Errorf("Pending %s: newest event %q, want the placement core's \"reclaimed-cpu: need 1000m, free 500m\"", pending, msg)
		}
		t.Logf("Pending %s: %s", pending, msg)
	})
}
