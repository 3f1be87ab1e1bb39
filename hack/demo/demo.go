package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

const (
	nodeCount = 10
	// nodeCores is every node's CPU.
	nodeCores = 16
	batchNS   = "batch"
	appsNS    = "apps"
)

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

type demo struct {
	out  io.Writer
	keep bool
	// realNodeOn adds a real kubelet at the end (DEMO_REAL_NODE=1).
	realNodeOn bool
	start      time.Time
	c          *cluster.Cluster
	nodes      []string
	tmp        string
	// rec keeps the looks at the nodes the closing picture draws.
	rec recorder
}

// step prints a progress line with the time since the start.
func (d *demo) step(format string, args ...interface{}) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) stop() {
	if d.c != nil {
		d.step("stopping the cluster and every process")
		d.c.Stop()
	}
	if d.tmp != "" {
		os.RemoveAll(d.tmp)
	}
}

func (d *demo) run(ctx context.Context) error {
	d.start = time.Now()
	var err error
	if d.tmp, err = os.MkdirTemp("", "kube-reclaim-demo-"); err != nil {
		return err
	}
	d.step("building kube-reclaim, then the control plane unless it is cached")
	bin, err := stack.BuildBinary(ctx, d.tmp)
	if err != nil {
		return err
	}
	if _, err := cluster.EnsureBinaries(ctx, d.out); err != nil {
		return err
	}
	ports, err := stack.NewPorts()
	if err != nil {
		return err
	}
	schedCfg, err := ports.SchedulerConfig()
	if err != nil {
		return err
	}
	d.step("starting etcd, kube-apiserver, controller-manager, scheduler (with the extender), kwok and metrics-server")
	d.c, err = cluster.Start(ctx, cluster.Options{MetricResolution: 10 * time.Second, SchedulerConfig: schedCfg})
	if err != nil {
		return err
	}
	c := d.c
	d.step("cluster ready; kubeconfig %s", c.Kubeconfig())
	for _, ns := range []string{batchNS, appsNS} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	d.nodes, err = c.AddNodes(ctx, nodeCount, cluster.NodeSpec{NamePrefix: "node", CPU: *resource.NewQuantity(nodeCores, resource.DecimalSI), Memory: resource.MustParse("64Gi")})
	if err != nil {
		return err
	}
	if err := c.WaitNodesReady(ctx, d.nodes, 2*time.Minute); err != nil {
		return err
	}
	d.step("%d kwok nodes Ready (16 cores, 64 GiB each)", nodeCount)

	// Regular work: every node runs a service whose usage differs per node.
	for i, n := range d.nodes {
		name := fmt.Sprintf("svc-%d", i)
		if err := d.createRegular(ctx, name, n); err != nil {
			return err
		}
		cpu := fmt.Sprintf("%d", 1+i%5*2) // 1, 3, 5, 7, 9 cores
		mem := fmt.Sprintf("%dGi", 4+i%4*8)
		if err := c.SetPodUsage(ctx, appsNS, name, cpu, mem); err != nil {
			return err
		}
	}
	d.step("regular pods running: each asks 4 cores / 16 GiB and uses 1 to 9 cores (kwok ResourceUsage)")

	// Configured as deploy/default configures them; only the period is
	// shorter, so that the demo does not wait 15 s between looks.
	// Eviction runs with its default, on for memory pressure.
	st, err := stack.Start(ctx, c, bin, ports, stack.Options{Extra: map[string][]string{stack.Publisher: {"--period=5s"}}})
	if err != nil {
		return err
	}
	for _, r := range []string{stack.Publisher, stack.Webhook, stack.Extender} {
		d.step("started: kube-reclaim %s", strings.Join(st.Args(r), " "))
	}
	stopRecording := d.record(ctx, 2*time.Second)
	defer stopRecording()
	d.step("webhook registered for nodes/status (failurePolicy Ignore, timeout 2s) and for pods asking reclaimed resources (failurePolicy Fail, timeout 5s), scheduler uses the extender")

	d.step("waiting for metrics-server to report usage and the publisher to publish every node (about a minute)")
	if err := d.waitPublished(ctx, 4*time.Minute); err != nil {
		return err
	}
	d.table(ctx, "published reclaimable capacity")

	d.step("wave 1: 12 batch pods asking 2 reclaimed cores and 4 GiB each (requests == limits); spread favours the most room")
	d.rec.mark(time.Since(d.start), "wave 1")
	if err := d.wave(ctx, "wave1", 12, 2000, 4<<30); err != nil {
		return err
	}
	d.settle(ctx)
	afterWave1 := d.table(ctx, "after wave 1")
	d.placements(ctx)
	d.enforced(ctx)

	// The batch pods do work: each uses 1.5 cores and 3 GiB of its grant.
	if err := d.batchUsage(ctx, afterWave1); err != nil {
		return err
	}
	// On node 0 CPU rises to near the node's 16 cores, memory untouched:
	// the room dips, placement stops there, and nothing is evicted. On
	// node 1 memory rises until the node's pods use 92 % of allocatable,
	// above the policy's eviction.memoryPressure.evictAbove (90 %).
	pressureMem := d.pressureMemory(afterWave1, d.nodes[1])
	d.step("usage rises: on %s CPU to 15 cores (memory untouched); on %s memory to %s, so that its pods use %.0f %% of allocatable memory",
		d.nodes[0], d.nodes[1], gib(pressureMem), 100*pressureShare)
	d.rec.mark(time.Since(d.start), "usage rises")
	if err := c.SetPodUsage(ctx, appsNS, "svc-0", "15", "4Gi"); err != nil {
		return err
	}
	if err := c.SetPodUsage(ctx, appsNS, "svc-1", "3", fmt.Sprint(pressureMem)); err != nil {
		return err
	}
	if err := d.waitShrunk(ctx, 90*time.Second); err != nil {
		d.step("warning: %v", err)
	}
	afterRise := d.table(ctx, "after the usage change")
	d.shed(ctx, afterRise)
	beforeWave2 := d.table(ctx, "after eviction")

	d.step("wave 2: 12 more batch pods of the same size; each goes only where the room published now covers it, or waits")
	d.rec.mark(time.Since(d.start), "wave 2")
	if err := d.wave(ctx, "wave2", 12, 2000, 4<<30); err != nil {
		return err
	}
	d.settle(ctx)
	final := d.table(ctx, "after wave 2")
	d.placements(ctx)
	if final == nil {
		return errors.New("cannot read the final state of the nodes")
	}
	lines, overbooked := summarize(afterWave1, beforeWave2, final)
	for _, l := range lines {
		d.step("%s", l)
	}
	stopRecording()
	if err := d.picture(); err != nil {
		d.step("warning: no picture: %v", err)
	}
	if len(overbooked) > 0 {
		return fmt.Errorf("the extender placed pods beyond the published room: %s", strings.Join(overbooked, "; "))
	}
	if d.realNodeOn {
		if err := d.realNode(ctx); err != nil {
			return err
		}
	}

	if d.keep {
		fmt.Fprintf(d.out, "\nDEMO_KEEP is set: everything keeps running. In another shell:\n\n  export KUBECONFIG=%s\n  kubectl get nodes\n  go run ./cmd/kubectl-reclaim nodes\n\nPress Ctrl-C to stop.\n", c.Kubeconfig())
		<-ctx.Done()
		return nil
	}
	return ctx.Err()
}

// Each batch pod uses batchUseCPU and batchUseMem of its grant (kwok
// ResourceUsage) once placed; pressureShare is the share of allocatable
// memory node 1's pods are raised to.
const (
	batchUseCPU   = "1500m"
	batchUseMem   = 3 << 30
	pressureShare = 0.92
)

// batchUsage gives every batch pod placed in rows its usage.
func (d *demo) batchUsage(ctx context.Context, rows []nodeRow) error {
	for _, r := range rows {
		for _, p := range r.batchPods {
			if err := d.c.SetPodUsage(ctx, batchNS, p, batchUseCPU, fmt.Sprint(batchUseMem)); err != nil {
				return err
			}
		}
	}
	return nil
}

// pressureMemory is the service memory that makes node's pods use
// pressureShare of its allocatable memory, with its batch pods in rows.
func (d *demo) pressureMemory(rows []nodeRow, node string) int64 {
	for _, r := range rows {
		if r.name == node {
			return int64(pressureShare*float64(r.allocMem)) - int64(len(r.batchPods))*batchUseMem
		}
	}
	alloc := float64(64 << 30) // every demo node's
	return int64(pressureShare * alloc)
}

// shed shows eviction on measured pressure. Node 0, whose room dipped below
// what its batch pods hold on CPU alone, keeps them all; node 1, in memory
// pressure, sheds batch pods (lowest priority, then youngest) until its
// pods use less than evictUntilBelow (85 %) of allocatable. It prints which
// pods left each node and the publisher's Events on it.
func (d *demo) shed(ctx context.Context, before []nodeRow) {
	busy := map[string]nodeRow{}
	for _, r := range before {
		busy[r.name] = r
	}
	cpuNode, memNode := d.nodes[0], d.nodes[1]
	if len(busy[memNode].batchPods) == 0 {
		d.step("eviction: %s runs no batch pod, so memory pressure there evicts nothing", memNode)
	}
	d.step("eviction (--eviction=on, the default; grace two periods): %s %s, and keeps its batch pods: a dip of the room is not pressure; "+
		"%s is in memory pressure and sheds batch pods until its pods use under 85 %% of allocatable memory",
		cpuNode, heldAndRoom(busy[cpuNode]), memNode)
	start := time.Now()
	// Wait for node 1's first eviction, then a few periods for the rest of
	// the episode (the fewest pods that bring use under 85 %).
	for time.Since(start) < 2*time.Minute && ctx.Err() == nil {
		if rows, err := d.rows(ctx); err == nil && len(byName(rows)[memNode].batchPods) < len(busy[memNode].batchPods) {
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(20 * time.Second)
	rows, _ := d.rows(ctx)
	now := byName(rows)
	for _, n := range []string{cpuNode, memNode} {
		b, a := busy[n], now[n]
		var gone []string
		for _, p := range b.batchPods {
			if !slices.Contains(a.batchPods, p) {
				gone = append(gone, p)
			}
		}
		if len(gone) == 0 {
			gone = []string{"none"}
		}
		d.step("%s: %s before, %s after %s; the node uses %s of %s memory; batch pods gone: %s", n, heldAndRoom(b), heldAndRoom(a),
			time.Since(start).Round(time.Second), gib(a.usageMem), gib(a.allocMem), strings.Join(gone, " "))
		evs, err := d.c.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n})
		if err != nil {
			continue
		}
		found := 0
		for _, e := range evs.Items {
			if e.Source.Component == "kube-reclaim-publisher" {
				fmt.Fprintf(d.out, "    Event on %s: %s %s: %s\n", n, e.Type, e.Reason, e.Message)
				found++
			}
		}
		if found == 0 {
			fmt.Fprintf(d.out, "    no publisher Event on %s\n", n)
		}
	}
}

func (d *demo) createRegular(ctx context.Context, name, node string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNS, Labels: map[string]string{"app": "service"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/service:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}}},
	}
	_, err := d.c.Client.CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// batchPod is the README's example: a best-effort batch pod on reclaimed
// capacity, with requests equal to limits.
func batchPod(name string, cpuMilli, memBytes int64) *corev1.Pod {
	r := corev1.ResourceList{
		names.CPU:    *resource.NewQuantity(cpuMilli, resource.DecimalSI),
		names.Memory: *resource.NewQuantity(memBytes, resource.BinarySI),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: batchNS, Labels: map[string]string{"app": "batch"}},
		Spec: corev1.PodSpec{
			PriorityClassName: "",
			RestartPolicy:     corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "job", Image: "registry.example/batch:1",
				Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}},
		},
	}
}

func (d *demo) wave(ctx context.Context, prefix string, n int, cpu, mem int64) error {
	for i := 0; i < n; i++ {
		if _, err := d.c.Client.CoreV1().Pods(batchNS).Create(ctx, batchPod(fmt.Sprintf("%s-%02d", prefix, i), cpu, mem), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until no batch pod changes node for a few seconds.
func (d *demo) settle(ctx context.Context) {
	last, stable := -1, 0
	for stable < 3 && ctx.Err() == nil {
		time.Sleep(2 * time.Second)
		pods, err := d.c.Client.CoreV1().Pods(batchNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound == last {
			stable++
		} else {
			stable, last = 0, bound
		}
	}
}

func (d *demo) waitPublished(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		done := 0
		for _, n := range d.nodes {
			node, err := d.c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if a, err := reclaimable.Parse(node.Annotations[names.Annotation]); err == nil && a.ZeroReason == "" && a.MetricsTime.After(d.start) {
				done++
			}
		}
		if done == len(d.nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return errors.New("the publisher did not publish every node in time; see the logs in " + d.c.Dir())
}

func (d *demo) waitShrunk(ctx context.Context, timeout time.Duration) error {
	before := map[string]int64{}
	for _, n := range d.nodes[:2] {
		node, err := d.c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a, _ := reclaimable.Parse(node.Annotations[names.Annotation])
		before[n] = a.CPUMilli
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		shrunk := 0
		for _, n := range d.nodes[:2] {
			node, err := d.c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err == nil {
				if a, err := reclaimable.Parse(node.Annotations[names.Annotation]); err == nil && a.CPUMilli < before[n] {
					shrunk++
				}
			}
		}
		if shrunk == 2 {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
	return errors.New("published values did not shrink yet")
}

type nodeRow struct {
	name               string
	allocCPU, allocMem int64
	usageCPU, usageMem int64
	// regularCPU is what the node's regular pods use (their PodMetrics).
	regularCPU     int64
	pubCPU, pubMem int64
	reqCPU, reqMem int64
	batch, regular int
	stale          string
	// batchPods are the names of the node's non-terminal reclaimed pods.
	batchPods []string
}

func (d *demo) rows(ctx context.Context) ([]nodeRow, error) {
	nodes, err := d.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := d.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	usage := map[string][2]int64{}
	if m, err := d.c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{}); err == nil {
		for _, nm := range m.Items {
			usage[nm.Name] = [2]int64{nm.Usage.Cpu().MilliValue(), nm.Usage.Memory().Value()}
		}
	}
	podCPU := map[string]int64{}
	if m, err := d.c.Metrics.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, pm := range m.Items {
			for _, c := range pm.Containers {
				podCPU[pm.Namespace+"/"+pm.Name] += c.Usage.Cpu().MilliValue()
			}
		}
	}
	byName := map[string]*nodeRow{}
	var rows []nodeRow
	for _, n := range nodes.Items {
		f := reclaimable.Judge(n.Annotations[names.Annotation], n.Annotations[names.Annotation] != "", time.Now(), reclaimable.DefaultStaleAfter, true)
		r := nodeRow{name: n.Name, allocCPU: n.Status.Allocatable.Cpu().MilliValue(), allocMem: n.Status.Allocatable.Memory().Value(),
			usageCPU: usage[n.Name][0], usageMem: usage[n.Name][1], pubCPU: f.Room.CPUMilli, pubMem: f.Room.MemoryBytes, stale: f.Reason}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	for i := range rows {
		byName[rows[i].name] = &rows[i]
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		r := byName[p.Spec.NodeName]
		if r == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if req, _ := names.PodRequest(p); !req.IsZero() {
			r.reqCPU += req.CPUMilli
			r.reqMem += req.MemoryBytes
			r.batch++
			r.batchPods = append(r.batchPods, p.Name)
		} else {
			r.regular++
			r.regularCPU += podCPU[p.Namespace+"/"+p.Name]
		}
	}
	return rows, nil
}

// table prints the nodes and returns the rows it printed (nil when they
// could not be read).
func (d *demo) table(ctx context.Context, title string) []nodeRow {
	rows, err := d.rows(ctx)
	if err != nil {
		d.step("table: %v", err)
		return nil
	}
	d.step("%s:", title)
	w := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "NODE\tALLOC CPU\tALLOC MEM\tUSAGE CPU\tUSAGE MEM\tRECLAIMED CPU\tRECLAIMED MEM\tBATCH REQ CPU\tBATCH REQ MEM\tBATCH\tREGULAR\t")
	for _, r := range rows {
		pub := fmt.Sprintf("%dm", r.pubCPU)
		if r.stale != "" {
			pub = "0 (" + r.stale + ")"
		}
		fmt.Fprintf(w, "%s\t%dm\t%s\t%dm\t%s\t%s\t%s\t%dm\t%s\t%d\t%d\t\n", r.name, r.allocCPU, gib(r.allocMem), r.usageCPU, gib(r.usageMem),
			pub, gib(r.pubMem), r.reqCPU, gib(r.reqMem), r.batch, r.regular)
	}
	w.Flush()
	return rows
}

func gib(b int64) string { return fmt.Sprintf("%.1fGi", float64(b)/(1<<30)) }

// enforced prints the native requests and limits stored for the batch pods,
// grouped by shape: what kubelet enforces (CFS quota and memory limit from
// the limits, CPU shares from the requests), as read back from the API.
func (d *demo) enforced(ctx context.Context) {
	pods, err := d.c.Client.CoreV1().Pods(batchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		d.step("enforced limits: %v", err)
		return
	}
	type shape struct{ text string }
	count := map[shape]int{}
	var order []shape
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, c := range p.Spec.Containers {
			verdict := "enforced"
			if err := enforcement.Enforced(&p.Spec, names); err != nil {
				verdict = "NOT enforced: " + err.Error()
			}
			rc, rm := c.Resources.Limits[names.CPU], c.Resources.Limits[names.Memory]
			k := shape{fmt.Sprintf("container %s: reclaimed %dm/%s -> native requests cpu=%s memory=%s, native limits cpu=%s memory=%s, qosClass %s (%s)",
				c.Name, rc.Value(), resource.NewQuantity(rm.Value(), resource.BinarySI),
				quantity(c.Resources.Requests, corev1.ResourceCPU), quantity(c.Resources.Requests, corev1.ResourceMemory),
				quantity(c.Resources.Limits, corev1.ResourceCPU), quantity(c.Resources.Limits, corev1.ResourceMemory), p.Status.QOSClass, verdict)}
			if count[k] == 0 {
				order = append(order, k)
			}
			count[k]++
		}
	}
	d.step("stored batch pods, as kubelet will enforce them (pod webhook):")
	for _, k := range order {
		fmt.Fprintf(d.out, "    %d x %s\n", count[k], k.text)
	}
}

// quantity prints l[name], or "unset".
func quantity(l corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return "unset"
	}
	return q.String()
}

// placements prints where every batch pod went, and for pending ones the
// scheduler's reason (the extender's per-node messages).
func (d *demo) placements(ctx context.Context) {
	pods, err := d.c.Client.CoreV1().Pods(batchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	perNode := map[string][]string{}
	var pending []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			pending = append(pending, p.Name)
			continue
		}
		perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], p.Name)
	}
	nodes := make([]string, 0, len(perNode))
	for n := range perNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		sort.Strings(perNode[n])
		fmt.Fprintf(d.out, "    %s: %s\n", n, strings.Join(perNode[n], " "))
	}
	if len(pending) == 0 {
		return
	}
	sort.Strings(pending)
	fmt.Fprintf(d.out, "    Pending (%d): %s\n", len(pending), strings.Join(pending, " "))
	evs, err := d.c.Client.CoreV1().Events(batchNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pending[0] + ",reason=FailedScheduling"})
	if err == nil && len(evs.Items) > 0 {
		fmt.Fprintf(d.out, "    why %s waits: %s\n", pending[0], evs.Items[len(evs.Items)-1].Message)
	}
}

// picture writes the closing picture (writeChart) and says where.
func (d *demo) picture() error {
	path := imagePath()
	d.rec.mu.Lock()
	samples, marks := slices.Clone(d.rec.samples), slices.Clone(d.rec.marks)
	d.rec.mu.Unlock()
	if err := writeChart(path, d.nodes, nodeCores, samples, marks); err != nil {
		return err
	}
	d.step("picture of the room, what batch pods held and the regular pods' usage per node over the run (CPU): %s", path)
	return nil
}
