package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// schedulerPair is one pod of the shipped kube-reclaim-scheduler
// Deployment, as host processes: a leader-elected kube-scheduler and its own
// extender on 127.0.0.1.
type schedulerPair struct {
	name string
	ext  *framework.Role
}

// startSchedulerPair starts the extender and the kube-scheduler of one pair.
// Both pairs elect their leader on the same Lease, as the two replicas of
// the Deployment do, with the shipped configuration's lease durations
// (kube-scheduler's defaults).
func startSchedulerPair(t *testing.T, c *cluster.Cluster, name string) failoverReplica {
	t.Helper()
	extPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ext := framework.StartRole(t, c, "extender-"+name, "extender",
		fmt.Sprintf("--listen-address=127.0.0.1:%d", extPort), "--publisher-lease-name=")
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  resourceName: kube-reclaim-scheduler
  resourceNamespace: default
%s`, c.Kubeconfig(), schedulerConfigFor(t, fmt.Sprintf("http://127.0.0.1:%d", extPort)))
	path := filepath.Join(c.Dir(), "scheduler-"+name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartProcess("kube-scheduler-"+name, c.Binaries().Scheduler, "--config="+path,
		"--authentication-kubeconfig="+c.Kubeconfig(), "--authorization-kubeconfig="+c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)); err != nil {
		t.Fatal(err)
	}
	return &schedulerPair{name: name, ext: ext}
}

// failoverReplica is one scheduler pod of a topology, as host processes.
type failoverReplica interface {
	id() string
	// ready waits until the replica would see the nodes.
	ready(t *testing.T, nodes int)
	// placed is how many pods the replica has placed.
	placed(t *testing.T) float64
	// end ends the replica's processes with end (cluster.StopComponent or
	// KillComponent).
	end(t *testing.T, end func(string) error)
}

func (p *schedulerPair) id() string { return p.name }

func (p *schedulerPair) ready(t *testing.T, nodes int) {
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		return p.ext.Metric(t, "kube_reclaim_extender_cached_nodes") >= float64(nodes)
	}); !ok {
		t.Fatalf("extender %s does not cache the %d nodes", p.name, nodes)
	}
}

// placed is how many pods the pair's extender has bound.
func (p *schedulerPair) placed(t *testing.T) float64 {
	return p.ext.Metric(t, "kube_reclaim_extender_binds_total", "result", "success")
}

func (p *schedulerPair) end(t *testing.T, end func(string) error) {
	for _, n := range []string{"kube-scheduler-" + p.name, "extender-" + p.name} {
		if err := end(n); err != nil {
			t.Fatal(err)
		}
	}
}

// pluginReplica is one pod of deploy/plugin-scheduler's Deployment, as a
// host process: kube-reclaim-scheduler with the shipped configuration,
// leader-elected on its Lease.
type pluginReplica struct {
	name string
	proc string
	c    *cluster.Cluster
}

func startPluginReplica(t *testing.T, c *cluster.Cluster, name string) failoverReplica {
	t.Helper()
	bin, err := cluster.EnsurePluginScheduler(context.Background(), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	// The shipped configuration tracks the publisher's Lease; no publisher
	// runs here.
	framework.RenewPublisherLease(t, c)
	cfg, _ := pluginSchedulerConfig(t, c, "kube-reclaim-scheduler-"+name+".yaml", true)
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &pluginReplica{name: name, proc: "kube-reclaim-scheduler-" + name, c: c}
	// --v=2 as deployed: each bind is logged, which placed counts.
	if err := c.StartProcess(r.proc, bin, "--config="+cfg, "--v=2",
		"--authentication-kubeconfig="+c.Kubeconfig(), "--authorization-kubeconfig="+c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *pluginReplica) id() string { return r.name }

// ready: kube-scheduler syncs its informers before it schedules.
func (r *pluginReplica) ready(*testing.T, int) {}

// placed counts the binds the replica's log reports (kube-scheduler logs
// each at --v=2).
func (r *pluginReplica) placed(*testing.T) float64 {
	return float64(strings.Count(r.c.Process(r.proc).Tail(1<<26), "Successfully bound pod to node"))
}

func (r *pluginReplica) end(t *testing.T, end func(string) error) {
	if err := end(r.proc); err != nil {
		t.Fatal(err)
	}
}

// TestSchedulerFailover runs the shipped topology's two scheduler pods and
// deletes the leading one in the middle of a burst of reclaimed pods: the
// standby's kube-scheduler takes the Lease, its own extender (informers
// warm, no assumptions) places the rest, and no node is over-booked at any
// look. It logs how long scheduling stopped, the figure docs/design.md
// gives as the cost of a failover: a deleted pod (SIGTERM) releases the
// Lease, a lost node (SIGKILL) leaves it to expire. The plugin topology
// (deploy/plugin-scheduler: the assume cache is the plugin's, in the
// scheduler itself) runs the harder case, the lost node.
func TestSchedulerFailover(t *testing.T) {
	stop := func(c *cluster.Cluster) func(string) error { return c.StopComponent }
	kill := func(c *cluster.Cluster) func(string) error { return c.KillComponent }
	for _, tc := range []struct {
		name  string
		start func(*testing.T, *cluster.Cluster, string) failoverReplica
		end   func(c *cluster.Cluster) func(string) error
	}{
		{"the leading pod is deleted", startSchedulerPair, stop},
		{"the leading pod's node is lost", startSchedulerPair, kill},
		{"plugin scheduler: the leading pod's node is lost", startPluginReplica, kill},
	} {
		t.Run(tc.name, func(t *testing.T) { testSchedulerFailover(t, tc.start, tc.end) })
	}
}

func testSchedulerFailover(t *testing.T, start func(*testing.T, *cluster.Cluster, string) failoverReplica, end func(c *cluster.Cluster) func(string) error) {
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	const (
		nodes   = 4
		cpu     = int64(4000)
		mem     = int64(8 << 30)
		podCPU  = int64(500)
		podMem  = int64(1 << 30)
		fitting = nodes * int(cpu/podCPU) // the room takes exactly this many pods
		extra   = 4                       // and these must stay Pending
	)
	names := framework.AddReadyNodes(t, c, nodes, cluster.NodeSpec{NamePrefix: "failover"}, time.Minute)
	room := map[string]reclaimable.Resources{}
	for _, n := range names {
		framework.SetAnnotation(t, c, n, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: time.Now()})
		framework.SetReclaimedStatus(t, c, n, cpu, mem)
		room[n] = reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	pairs := []failoverReplica{start(t, c, "a"), start(t, c, "b")}
	for _, p := range pairs {
		p.ready(t, nodes)
	}

	const ns = "failover"
	framework.CreateNamespace(t, c, ns)
	newPod := func(i int) *corev1.Pod {
		p := framework.ReclaimedPod(ns, fmt.Sprintf("batch-%02d", i), podCPU, podMem)
		p.Spec.SchedulerName = extender.SchedulerName
		if _, err := enforcement.Enforce(&p.Spec, framework.Names); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The first pod tells which pair leads: only the leader places.
	framework.CreatePod(t, c, newPod(0))
	if _, ok := framework.Poll(90*time.Second, 200*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) == 1
	}); !ok {
		t.Fatalf("no scheduler placed the first pod\n%s", c.LogTails())
	}
	// The extender counts a bind once its Binding call has returned, which
	// can be after the pod shows bound: wait for the count.
	var first [2]float64
	framework.Poll(10*time.Second, 100*time.Millisecond, func() bool {
		first = [2]float64{pairs[0].placed(t), pairs[1].placed(t)}
		return first[0]+first[1] >= 1
	})
	leader, standby := pairs[0], pairs[1]
	if first[0] == 0 {
		leader, standby = standby, leader
		first[0], first[1] = first[1], first[0]
	}
	if first[0] != 1 || first[1] != 0 {
		t.Fatalf("placed: pair %s %v, pair %s %v; want the first pod placed by exactly one", leader.id(), first[0], standby.id(), first[1])
	}

	// The burst: a pod every 100 ms, the leader stopped after a third of them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var created sync.WaitGroup
	created.Add(1)
	go func() {
		defer created.Done()
		for i := 1; i < fitting+extra; i++ {
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, newPod(i), metav1.CreateOptions{}); err != nil {
				t.Errorf("creating pod %d: %v", i, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if _, ok := framework.Poll(60*time.Second, 50*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) >= fitting/3
	}); !ok {
		t.Fatalf("the leader did not place a third of the burst\n%s", c.LogTails())
	}
	boundBefore := len(framework.MustPods(t, c, ns).BoundTo)
	stopped := time.Now()
	leader.end(t, end(c))

	// Every look until the burst is placed: no node over-booked; the first
	// pod bound after the stop ends the gap.
	var gap time.Duration
	looks := 0
	_, ok := framework.Poll(3*time.Minute, 100*time.Millisecond, func() bool {
		st := framework.MustPods(t, c, ns)
		looks++
		if over := st.Overbooked(room); len(over) > 0 {
			t.Fatalf("look %d: %v", looks, over)
		}
		if gap == 0 && len(st.BoundTo) > boundBefore {
			gap = time.Since(stopped)
		}
		return len(st.BoundTo) >= fitting
	})
	created.Wait()
	if !ok {
		st := framework.MustPods(t, c, ns)
		t.Fatalf("after the failover %d of %d pods are bound (pending %v)\n%s", len(st.BoundTo), fitting, st.Pending, c.LogTails())
	}
	if standby.placed(t) == 0 {
		t.Fatalf("the standby placed nothing: the pods were not placed through it")
	}
	// The room is full: the extra pods must stay Pending, at every look. The
	// control frees the room of one pod: the standby, now the leader, must
	// then place exactly one extra pod through its extender.
	framework.ExpectAbsence(t, framework.Absence{
		Window: 5 * time.Second, Every: 250 * time.Millisecond, ControlAt: 2 * time.Second, ControlWithin: time.Minute,
		Control: func() error {
			return c.Client.CoreV1().Pods(ns).Delete(context.Background(), "batch-00", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		},
		Look: func(time.Duration) ([]string, bool) {
			st := framework.MustPods(t, c, ns)
			v := st.Overbooked(room)
			if len(st.BoundTo) > fitting {
				v = append(v, fmt.Sprintf("%d pods bound, the room takes %d", len(st.BoundTo), fitting))
			}
			_, first := st.BoundTo["batch-00"]
			return v, !first && len(st.BoundTo) == fitting
		},
	})
	t.Logf("failover: leader pair %s stopped with %d of %d pods bound; the standby bound the next pod %v later (%d looks, none over-booked); standby bound %v pods",
		leader.id(), boundBefore, fitting, gap.Round(100*time.Millisecond), looks, standby.placed(t))
}
