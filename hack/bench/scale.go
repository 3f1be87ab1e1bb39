package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// scaleConfig sizes `bench scale`.
type scaleConfig struct {
	nodes, podsPerNode int
	observe, heartbeat time.Duration
	settle             time.Duration
}

func (c *scaleConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "scale-nodes", 1000, "kwok nodes of the real local cluster")
	fs.IntVar(&c.podsPerNode, "scale-pods-per-node", 20, "running pods per node (2 of them reclaimed)")
	// The publisher rewrites every node once per 5-minute refresh interval:
	// a window without that round would leave the steady state's writes out
	// of the CPU per cycle.
	fs.DurationVar(&c.observe, "scale-observe", 6*time.Minute, "how long both processes are watched after start-up (RSS is read as well after 3 minutes)")
	fs.DurationVar(&c.settle, "scale-settle", 20*time.Second, "start the roles once no pod has changed for this long")
	// A kubelet computes its status every 10 s but, with node Leases, posts
	// it only when it changed or every nodeStatusReportFrequency (5m);
	// kwok's heartbeat always changes it. Every node status write is a watch
	// event both roles decode.
	fs.DurationVar(&c.heartbeat, "scale-heartbeat", 5*time.Minute, "kwok node status heartbeat interval (kubelet posts an unchanged status every 5m)")
}

// scaleProcess is one role's figures, in MiB as memory limits are written:
// at start-up (once ready) and at the end of the observation. Peak is the
// kernel's high-water mark, start-up included.
type scaleProcess struct {
	Role         string  `json:"role"`
	ReadySeconds float64 `json:"readySeconds"`
	StartRSSMiB  float64 `json:"startRssMiB"`
	StartPeakMiB float64 `json:"startPeakMiB"`
	// MidRSSMiB is read rssAt into the observation (0 when it is shorter).
	MidRSSMiB  float64 `json:"midRssMiB"`
	EndRSSMiB  float64 `json:"endRssMiB"`
	EndPeakMiB float64 `json:"endPeakMiB"`
}

type scaleResult struct {
	Nodes            int            `json:"nodes"`
	HeartbeatSeconds float64        `json:"heartbeatSeconds"`
	Pods             int            `json:"pods"`
	ObserveSeconds   float64        `json:"observeSeconds"`
	MidSeconds       float64        `json:"midSeconds"`
	Processes        []scaleProcess `json:"processes"`
	PublisherCycles  int            `json:"publisherCycles"`
	PublisherCPU     float64        `json:"publisherCpuSecondsPerCycle"`
	PublisherWrites  int            `json:"publisherWritesDuringObservation"`
	PublisherStartup float64        `json:"publisherStartupCpuSeconds"`
}

const scaleNS = "scale"

// rssAt is when into the observation both roles' RSS is read besides its end.
const rssAt = 3 * time.Minute

// runScale is `bench scale`: the publisher and the extender as real
// processes with deploy/default's arguments against the real local control
// plane (etcd, kube-apiserver, metrics-server scraping kwok's nodes), holding
// kwok nodes and running pods.
func runScale(ctx context.Context, cfg scaleConfig, out io.Writer) (*scaleResult, error) {
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	pods := cfg.nodes * cfg.podsPerNode
	step("scale: publisher and extender on the real local API server with %d kwok nodes (node status every %s) and %d running pods", cfg.nodes, cfg.heartbeat, pods)
	tmp, err := os.MkdirTemp("", "kube-reclaim-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin, err := stack.BuildBinary(ctx, tmp)
	if err != nil {
		return nil, err
	}
	if _, err := cluster.EnsureBinaries(ctx, out); err != nil {
		return nil, err
	}
	c, err := cluster.Start(ctx, cluster.Options{HeartbeatInterval: cfg.heartbeat})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	nodes, err := c.AddNodes(ctx, cfg.nodes, cluster.NodeSpec{NamePrefix: "scale"})
	if err != nil {
		return nil, err
	}
	if err := c.WaitNodesReady(ctx, nodes, 5*time.Minute); err != nil {
		return nil, err
	}
	step("%d nodes Ready", len(nodes))
	if err := createScalePods(ctx, client, nodes, cfg.podsPerNode); err != nil {
		return nil, err
	}
	step("%d pods created, bound to their nodes", pods)
	if err := waitPodsRunning(ctx, client, pods, 15*time.Minute); err != nil {
		return nil, err
	}
	step("%d pods Running", pods)
	// kwok goes on rewriting the status of pods it has already made Running
	// for a while after the last one turned Running (docs/benchmarks.md,
	// P4): started now, the publisher would be measured decoding kwok's
	// start-up rather than a cluster of running pods.
	updates, err := waitPodsSettled(ctx, client, cfg.settle, 15*time.Minute)
	if err != nil {
		return nil, err
	}
	step("pods settled: %d pod updates after all were Running, then none for %s", updates, cfg.settle)

	roles, err := deployedRoles(tmp, c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	started := time.Now()
	for _, r := range roles {
		if err := c.StartProcessWithEnv(r.role, bin, r.env, r.args...); err != nil {
			return nil, err
		}
	}
	step("started the publisher (without leader election, deployed --kube-api-qps) and the extender (without the lease check) with deploy/default's arguments and environment")
	res := &scaleResult{Nodes: cfg.nodes, Pods: pods, HeartbeatSeconds: cfg.heartbeat.Seconds()}
	for _, r := range roles {
		// The publisher is ready after its first cycle, which writes every node.
		if err := waitReady(ctx, c, r.role, fmt.Sprintf("http://127.0.0.1:%d/readyz", r.health), 10*time.Minute); err != nil {
			return nil, err
		}
		s, err := readProcStats(c.Process(r.role).PID())
		if err != nil {
			return nil, err
		}
		res.Processes = append(res.Processes, scaleProcess{Role: r.role, ReadySeconds: time.Since(started).Seconds(), StartRSSMiB: mib(s.RSSMB), StartPeakMiB: mib(s.PeakMB)})
		if r.role == stack.Publisher {
			res.PublisherStartup = s.CPU.Seconds()
		}
		step("%s ready: RSS %.0f MiB, peak %.0f MiB", r.role, mib(s.RSSMB), mib(s.PeakMB))
	}
	pubMetrics := metricsTarget{url: fmt.Sprintf("https://127.0.0.1:%d/metrics", roles[0].metrics), token: stack.AdminToken(c)}
	cycles0, writes0, err := publisherCounters(ctx, pubMetrics)
	if err != nil {
		return nil, err
	}
	pub0, err := readProcStats(c.Process(stack.Publisher).PID())
	if err != nil {
		return nil, err
	}
	observed := time.Now()
	if cfg.observe > rssAt {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(rssAt):
		}
		for i, r := range roles {
			s, err := readProcStats(c.Process(r.role).PID())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.role, err)
			}
			res.Processes[i].MidRSSMiB = mib(s.RSSMB)
		}
		res.MidSeconds = time.Since(observed).Seconds()
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(cfg.observe - time.Since(observed)):
	}
	res.ObserveSeconds = time.Since(observed).Seconds()
	cycles1, writes1, err := publisherCounters(ctx, pubMetrics)
	if err != nil {
		return nil, err
	}
	res.PublisherCycles, res.PublisherWrites = int(cycles1-cycles0), int(writes1-writes0)
	for i, r := range roles {
		s, err := readProcStats(c.Process(r.role).PID())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.role, err)
		}
		res.Processes[i].EndRSSMiB, res.Processes[i].EndPeakMiB = mib(s.RSSMB), mib(s.PeakMB)
		if r.role == stack.Publisher && res.PublisherCycles > 0 {
			res.PublisherCPU = (s.CPU - pub0.CPU).Seconds() / float64(res.PublisherCycles)
		}
	}
	printScale(out, res)
	return res, nil
}

// createScalePods creates perNode pods on every node, bound by nodeName (no
// scheduler involved); the last two of each node ask reclaimed resources,
// shaped as the pod webhook would shape them.
func createScalePods(ctx context.Context, client kubernetes.Interface, nodes []string, perNode int) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, node := range nodes {
		for j := range perNode {
			pod := scalePod(names, node, fmt.Sprintf("p-%d-%d", i, j), j >= perNode-2)
			g.Go(func() error {
				// The namespace's default ServiceAccount appears shortly
				// after the namespace: retry until admission finds it.
				return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					_, err := client.CoreV1().Pods(scaleNS).Create(ctx, pod, metav1.CreateOptions{})
					// An earlier try that timed out may have created it.
					return err == nil || apierrors.IsAlreadyExists(err), nil
				})
			})
		}
	}
	return g.Wait()
}

func scalePod(names reclaimable.Names, node, name string, reclaimed bool) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	if reclaimed {
		rl = corev1.ResourceList{names.CPU: resource.MustParse("500"), names.Memory: resource.MustParse("512Mi")}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: scaleNS, Labels: map[string]string{"app": "scale"}},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1",
				Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}}},
	}
	if reclaimed {
		_, _ = enforcement.Enforce(&pod.Spec, names) // always enforceable: one container, requests = limits
	}
	return pod
}

// waitPodsRunning waits until kwok reports n pods of the namespace Running.
func waitPodsRunning(ctx context.Context, client kubernetes.Interface, n int, timeout time.Duration) error {
	running := 0
	// Every look lists the namespace's Running pods: look seldom enough
	// not to be the API server's main load.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(scaleNS).List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: "status.phase=Running"})
		if err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		running = len(list.Items)
		return running >= n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods Running: %w", running, n, err)
	}
	return nil
}

// waitPodsSettled watches the bench's pods until none has changed for quiet
// and returns how many changes it saw.
func waitPodsSettled(ctx context.Context, client kubernetes.Interface, quiet, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods := client.CoreV1().Pods(scaleNS)
	list, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	changes := 0
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return changes, fmt.Errorf("pods still changing after %s (%d changes): %w", timeout, changes, ctx.Err())
		case <-timer.C:
			return changes, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return changes, fmt.Errorf("pod watch ended after %d changes", changes)
			}
			if ev.Type == watch.Error {
				return changes, fmt.Errorf("pod watch: %v", ev.Object)
			}
			changes++
			timer.Reset(quiet)
		}
	}
}

func printScale(out io.Writer, r *scaleResult) {
	fmt.Fprintf(out, "\n%d kwok nodes / %d running pods on the real local API server, node status every %.0f s\n", r.Nodes, r.Pods, r.HeartbeatSeconds)
	// The RSS read rssAt into the window, or "-" when the window was shorter.
	mid := func(p scaleProcess) string {
		if r.MidSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", p.MidRSSMiB)
	}
	fmt.Fprintf(out, "%-10s %8s %15s %16s %18s %15s %16s\n", "process", "ready s", "start RSS MiB", "start peak MiB",
		fmt.Sprintf("RSS MiB at %.0f s", rssAt.Seconds()), "end RSS MiB", "end peak MiB")
	for _, p := range r.Processes {
		fmt.Fprintf(out, "%-10s %8.1f %15.0f %16.0f %18s %15.0f %16.0f\n", p.Role, p.ReadySeconds, p.StartRSSMiB, p.StartPeakMiB, mid(p), p.EndRSSMiB, p.EndPeakMiB)
	}
	fmt.Fprintf(out, "publisher: %d cycles in %.0f s observed, %.3f s CPU per cycle, %d writes; %.1f s CPU until ready\n",
		r.PublisherCycles, r.ObserveSeconds, r.PublisherCPU, r.PublisherWrites, r.PublisherStartup)
}

// mib converts MB (10^6 bytes, as procStats reads them) to MiB.
func mib(mb float64) float64 { return mb * 1e6 / (1 << 20) }
