package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// schedulerConfig sizes the P2 run.
type schedulerConfig struct {
	nodes, pods, workers, warmup int
	extenderQPS                  int
	extenderArgs                 string
	cpuMilli                     int64
	memBytes                     int64
	heartbeat                    time.Duration
	phaseTimeout                 time.Duration
	reclaimedFirst               bool
	rounds                       int
	profileDir                   string
	// runs: consecutive runs, each on a new cluster; P2 is judged on the
	// median of their ratios.
	runs int
	// topologies: comma-separated topology names, each measured runs times.
	topologies string
}

// parseTopologies reads the -topologies flag: known names, each once.
func parseTopologies(s string) ([]topology, error) {
	var out []topology
	for _, name := range strings.Split(s, ",") {
		t := topology(strings.TrimSpace(name))
		if !slices.Contains(topologies, t) {
			return nil, fmt.Errorf("-topologies: unknown topology %q (known: %v)", name, topologies)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("-topologies: %q named twice", t)
		}
		out = append(out, t)
	}
	return out, nil
}

func (c *schedulerConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "nodes", 1000, "kwok nodes")
	fs.IntVar(&c.pods, "pods", 1000, "pods timed per kind (reclaimed, native)")
	fs.IntVar(&c.workers, "workers", 50, "concurrent pod creators")
	fs.IntVar(&c.warmup, "warmup", 1000, "pods of each kind scheduled and deleted before the timed phases: as many as a timed phase, so that the processes' caches and heaps have grown to their size before the first timed phase")
	fs.IntVar(&c.extenderQPS, "extender-qps", 500, "the extender's --kube-api-qps (burst twice that); 500 is what test/cluster gives kube-scheduler, the deployed default is 50")
	fs.StringVar(&c.extenderArgs, "extender-args", "", "more flags for the extender, separated by spaces, after the deployed ones (an A/B of a setting, e.g. --max-in-flight-binds=32)")
	fs.Int64Var(&c.cpuMilli, "cpu", 100, "CPU per pod in millicores (reclaimed-cpu or cpu)")
	fs.Int64Var(&c.memBytes, "memory", 128<<20, "memory per pod in bytes (reclaimed-memory or memory)")
	fs.DurationVar(&c.heartbeat, "heartbeat", 5*time.Minute, "kwok node status write interval: 5m is when a kubelet with node Leases posts an unchanged status; 10s writes as often as it computes one, a background that took most of this machine's two cores")
	fs.DurationVar(&c.phaseTimeout, "phase-timeout", 2*time.Minute, "give up waiting for a phase's pods to be bound after this")
	fs.IntVar(&c.rounds, "abba-rounds", 2, "A B B A rounds per run: the machine's speed varies from one 10-s phase to the next by more than what the extender adds, so each kind is timed 2×rounds times")
	fs.BoolVar(&c.reclaimedFirst, "reclaimed-first", false, "time the phases reclaimed, native, native, reclaimed instead of native, reclaimed, reclaimed, native")
	fs.IntVar(&c.runs, "scheduler-runs", goals.SchedulingRatio.MedianOf, "consecutive runs, each on a new cluster; the P2 goal is on the median of their ratios (it asks for "+strconv.Itoa(goals.SchedulingRatio.MedianOf)+"; fewer leave it unjudged)")
	fs.StringVar(&c.topologies, "topologies", string(topologyExtender)+","+string(topologyPlugin), "the topologies measured, comma-separated: extender (upstream kube-scheduler and the extender process) and plugin (kube-reclaim-scheduler, the placement plugin built in); each makes -scheduler-runs runs, taken in turns")
	fs.StringVar(&c.profileDir, "profile-dir", "", "if set, write kube-scheduler's CPU profile (the first 4s) and execution trace (the next 2s) of each timed phase there, and the extender's CPU profile (the first 8s; the extender then runs as hack/bench/pprofwrap, the same code with a profiler on loopback)")
}

// phaseResult is one timed batch of pods.
type phaseResult struct {
	Kind  string `json:"kind"`
	Pods  int    `json:"pods"`
	Bound int    `json:"bound"`
	// CreateSeconds: first create sent to last create answered.
	CreateSeconds float64 `json:"createSeconds"`
	// Seconds: first create sent to last pod seen bound.
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// BindP50/P99: from a pod's create answered to it seen bound.
	BindP50ms float64 `json:"bindP50Ms"`
	BindP99ms float64 `json:"bindP99Ms"`
	// ExtenderMeanMs: mean server time per extender verb during the phase,
	// from the extender's request histogram (reclaimed phase only).
	ExtenderMeanMs map[string]float64 `json:"extenderMeanMs,omitempty"`
	// NodesPerCall: mean node names per extender call during the phase, by
	// verb (reclaimed phase only).
	NodesPerCall map[string]float64 `json:"nodesPerCall,omitempty"`
	// ExtenderBusyPerPod: extender calls answered 429 (every in-flight slot
	// of the verb taken) per pod bound during the phase, by verb
	// (reclaimed phase only): each sends its pod back to the scheduler's
	// queue.
	ExtenderBusyPerPod map[string]float64 `json:"extenderBusyPerPod,omitempty"`
	// AlgorithmMeanMs: kube-scheduler's mean scheduling algorithm time per
	// pod during the phase (filters and scores, the extender's calls
	// included: the serial part of a scheduling cycle); 0 if not read.
	AlgorithmMeanMs float64 `json:"algorithmMeanMs"`
	// CPUPerPodMs: CPU time of each process on the machine during the
	// phase (the cluster's components, the extender, this bench's pod
	// creators) beyond its background use (BackgroundCores over the
	// phase's duration), per pod bound, in ms. Both phases share two
	// cores, so what a pod costs the machine in all is what bounds the
	// rate.
	CPUPerPodMs map[string]float64 `json:"cpuPerPodMs,omitempty"`
	// APIPerPod: kube-apiserver's requests (by verb, resource and
	// subresource) and watch events sent (by resource) during the phase, per
	// pod bound; what the API server is asked to do for a pod of the kind.
	APIPerPod map[string]float64 `json:"apiPerPod,omitempty"`
	// IdleCores and StealCores: the machine's idle (iowait included) and
	// stolen CPU during the phase, in cores. A phase that left cores idle
	// was not bound by CPU; steal is time the hypervisor gave elsewhere.
	IdleCores  float64 `json:"idleCores"`
	StealCores float64 `json:"stealCores"`
	Note       string  `json:"note,omitempty"`
}

type schedulerResult struct {
	Topology    topology `json:"topology"`
	Nodes       int      `json:"nodes"`
	Pods        int      `json:"pods"`
	Workers     int      `json:"workers"`
	ExtenderQPS int      `json:"extenderQps"`
	// PercentageOfNodesToScore is the reclaimed pods' profile's.
	PercentageOfNodesToScore int32 `json:"percentageOfNodesToScore"`
	// Native and Reclaimed merge the timed phases of each kind
	// (mergePhases); Phases are all of them in the order they ran.
	Native    phaseResult   `json:"native"`
	Reclaimed phaseResult   `json:"reclaimed"`
	Phases    []phaseResult `json:"phases"`
	// Ratio is reclaimed pods/s over native pods/s.
	Ratio float64 `json:"ratio"`
	// BackgroundCores: what each process used with no pod being scheduled
	// (node heartbeats, informers), measured before the timed phases.
	BackgroundCores map[string]float64 `json:"backgroundCores,omitempty"`
}

const benchNS = "bench"

type schedBench struct {
	cfg    schedulerConfig
	topo   topology
	out    io.Writer
	start  time.Time
	c      *cluster.Cluster
	client kubernetes.Interface
	names  reclaimable.Names
	// extPprof is the extender's profiler address (-profile-dir only).
	extPprof string

	// profiles counts the phases profiled, by kind.
	profiles map[string]int

	mu    sync.Mutex
	bound map[types.UID]time.Time
	// boundCh is signalled on every newly bound pod.
	boundCh chan struct{}
}

func (b *schedBench) step(format string, args ...any) {
	fmt.Fprintf(b.out, "[%6.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// runSchedulerRuns is `bench scheduler`: for each topology, cfg.runs
// consecutive runs, each on a new cluster, then P2 judged on the median of
// their ratios. The topologies take turns (run 1 of each, then run 2 of
// each, ...), so that what the machine does over the whole bench falls on
// all of them alike. A run that fails counts as not measured and the next
// one goes on; the error names every failed run.
func runSchedulerRuns(ctx context.Context, cfg schedulerConfig, out io.Writer) ([]p2Set, error) {
	topos, err := parseTopologies(cfg.topologies)
	if err != nil {
		return nil, err
	}
	n := max(cfg.runs, 1)
	sets := make([]p2Set, len(topos))
	var errs []error
	judge := func() []p2Judgement {
		js := make([]p2Judgement, len(sets))
		for k := range sets {
			sets[k].P2 = judgeP2(sets[k].Topology, sets[k].Runs)
			js[k] = sets[k].P2
		}
		return js
	}
	for k, t := range topos {
		sets[k].Topology = t
	}
	for i := range n {
		for k, t := range topos {
			section(out, fmt.Sprintf("P2 scheduler throughput, %s topology, run %d of %d", t, i+1, n))
			r, err := runScheduler(ctx, cfg, t, out)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s topology, run %d of %d: %w", t, i+1, n, err))
				fmt.Fprintln(out, "error:", err)
			}
			sets[k].Runs = append(sets[k].Runs, r)
			if ctx.Err() != nil {
				judge()
				return sets, ctx.Err()
			}
		}
	}
	printP2(out, judge())
	return sets, errors.Join(errs...)
}

// runScheduler is one run of `bench scheduler` on topology t.
func runScheduler(ctx context.Context, cfg schedulerConfig, t topology, out io.Writer) (*schedulerResult, error) {
	b := &schedBench{cfg: cfg, topo: t, out: out, start: time.Now(), names: reclaimable.MustNames(reclaimable.DefaultDomain),
		bound: map[types.UID]time.Time{}, boundCh: make(chan struct{}, 1), profiles: map[string]int{}}
	defer func() {
		if b.c != nil {
			b.c.Stop()
		}
	}()
	return b.run(ctx)
}

func (b *schedBench) run(ctx context.Context) (*schedulerResult, error) {
	cfg := b.cfg
	tmp, err := os.MkdirTemp("", "kube-reclaim-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b.step("P2 scheduler throughput, %s topology: %d kwok nodes, %d pods per kind, %d creators", b.topo, cfg.nodes, cfg.pods, cfg.workers)
	if _, err := cluster.EnsureBinaries(ctx, b.out); err != nil {
		return nil, err
	}
	// Both topologies: native pods take the default profile and reclaimed
	// pods the shipped kube-reclaim-scheduler profile of one scheduler
	// process, so the ratio is of one binary's two profiles.
	var sched schedulerSetup
	if b.topo == topologyPlugin {
		sched, err = b.pluginSetup(ctx)
	} else {
		sched, err = b.extenderSetup(ctx, tmp)
	}
	if err != nil {
		return nil, err
	}
	b.step("starting etcd, kube-apiserver, controller-manager, %s (profiles %s with percentageOfNodesToScore %d, and %s; %s), kwok; no metrics-server",
		sched.binaryName, extender.SchedulerName, sched.percentage, corev1.DefaultSchedulerName, sched.placement)
	b.c, err = cluster.Start(ctx, cluster.Options{NoMetricsServer: true, SchedulerBinary: sched.binary, SchedulerConfig: sched.config, HeartbeatInterval: cfg.heartbeat})
	if err != nil {
		return nil, err
	}
	c := b.c
	rc := c.RESTConfig()
	// The creators must not be what limits the rate.
	rc.QPS, rc.Burst = 5000, 10000
	if b.client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	nodes, err := c.AddNodes(ctx, cfg.nodes, cluster.NodeSpec{NamePrefix: "bench", CPU: resource.MustParse("32"), Memory: resource.MustParse("128Gi"), Pods: 110})
	if err != nil {
		return nil, err
	}
	if err := c.WaitNodesReady(ctx, nodes, 5*time.Minute); err != nil {
		return nil, err
	}
	b.step("%d nodes Ready", len(nodes))
	if err := b.annotate(ctx, nodes); err != nil {
		return nil, err
	}
	scorer := "the profile's NodeResourcesFit scores it"
	if b.topo == topologyPlugin {
		scorer = "the plugin scores the annotation's room"
	}
	b.step("annotated every node with fresh reclaimable room (32 cores, 128 GiB), in capacity and allocatable too (as the node webhook puts it there; %s)", scorer)

	if sched.extender != nil {
		if err := b.startExtender(ctx, sched.extender); err != nil {
			return nil, err
		}
	}

	if _, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := b.waitServiceAccount(ctx); err != nil {
		return nil, err
	}
	stopInf := b.watchBound()
	defer stopInf()

	if cfg.warmup > 0 {
		for _, reclaimed := range []bool{false, true} {
			p, err := b.phase(ctx, "warmup", reclaimed, cfg.warmup)
			if err != nil {
				return nil, err
			}
			if p.Bound < p.Pods {
				return nil, fmt.Errorf("warm-up: only %d of %d %s pods bound: %s", p.Bound, p.Pods, p.Kind, p.Note)
			}
			if err := b.deleteAll(ctx); err != nil {
				return nil, err
			}
		}
		b.step("warm-up done: %d pods of each kind scheduled and deleted", cfg.warmup)
		// The deletions' aftermath (watch events to every process) must not
		// count as background.
		if err := sleep(ctx, warmupSettle); err != nil {
			return nil, err
		}
	}
	res := &schedulerResult{Topology: b.topo, Nodes: cfg.nodes, Pods: cfg.pods, Workers: cfg.workers, PercentageOfNodesToScore: sched.percentage}
	if sched.extender != nil {
		res.ExtenderQPS = cfg.extenderQPS
	}
	// Each kind is timed in rounds of A B B A: the first timed phase of a
	// run was the slow one whichever kind it was (docs/benchmarks.md, P2),
	// so a single phase each measured the order as much as the extender.
	// A B B A cancels a drift that is linear in time, and more rounds
	// average the phase-to-phase swings of the machine's speed.
	abba := []bool{false, true, true, false}
	if cfg.reclaimedFirst {
		abba = []bool{true, false, false, true}
	}
	var order []bool
	for range max(cfg.rounds, 1) {
		order = append(order, abba...)
	}
	var phases [2][]phaseResult // by kind: native, reclaimed
	// The extender's request and node-count histograms; the plugin answers
	// in process and has no calls to count.
	var extMetrics *metricsTarget
	if sched.extender != nil {
		extMetrics = &metricsTarget{url: fmt.Sprintf("https://127.0.0.1:%d/metrics", sched.extender.metricsPort), token: stack.AdminToken(c)}
	}
	idleFrom, idleStart := b.processCPU(), time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(backgroundWindow):
	}
	res.BackgroundCores = cpuRate(idleFrom, b.processCPU(), time.Since(idleStart))
	b.step("background CPU with no pod scheduled, over %s: %.2f cores", backgroundWindow, res.BackgroundCores["all"])
	for i, reclaimed := range order {
		var before map[string]*dto.MetricFamily
		if extMetrics != nil && reclaimed {
			before, _ = scrape(ctx, *extMetrics)
		}
		algoBefore, _ := b.algorithmTime(ctx)
		apiBefore, apiErr := b.apiCounts(ctx)
		cpuBefore, machineBefore, phaseStart := b.processCPU(), readMachineCPU(), time.Now()
		profiled := b.profileScheduler(ctx, reclaimed)
		// Fresh names per phase: kwok deletes a pod by name, with no UID
		// precondition, when it sees the pod's deletion, and on a loaded
		// machine it sees the previous phase's deletions seconds late. Pods
		// reusing those names were deleted by it and never bound.
		p, err := b.phase(ctx, fmt.Sprintf("timed%d", i+1), reclaimed, cfg.pods)
		if err != nil {
			return nil, err
		}
		p.CPUPerPodMs = cpuPerPod(cpuBefore, b.processCPU(), res.BackgroundCores, time.Since(phaseStart), p.Bound)
		p.IdleCores, p.StealCores = readMachineCPU().since(machineBefore, time.Since(phaseStart))
		if apiAfter, err := b.apiCounts(ctx); err == nil && apiErr == nil {
			p.APIPerPod = perPod(apiBefore, apiAfter, p.Bound)
		}
		if extMetrics != nil && reclaimed {
			if after, err := scrape(ctx, *extMetrics); err == nil {
				p.ExtenderMeanMs = meanDelta(verbTimes(before, extenderDurationMetric, "route"), verbTimes(after, extenderDurationMetric, "route"), 1000)
				p.NodesPerCall = meanDelta(verbTimes(before, nodesPerCallMetric, "verb"), verbTimes(after, nodesPerCallMetric, "verb"), 1)
				p.ExtenderBusyPerPod = busyPerPod(before, after, p.Bound)
			}
		}
		if algoAfter, err := b.algorithmTime(ctx); err == nil {
			p.AlgorithmMeanMs = meanDelta(map[string]verbTime{"": algoBefore}, map[string]verbTime{"": algoAfter}, 1000)[""]
		} else {
			b.step("kube-scheduler metrics not read: %v", err)
		}
		// After the phase's figures: the profile may outlast the phase.
		if err := profiled(); err != nil {
			b.step("kube-scheduler not profiled: %v", err)
		}
		b.step("%s: %d/%d bound in %.2fs (creates took %.2fs): %.1f pods/s; %s", p.Kind, p.Bound, p.Pods, p.Seconds, p.CreateSeconds, p.PodsPerSecond, b.rssLine())
		res.Phases = append(res.Phases, p)
		if reclaimed {
			phases[1] = append(phases[1], p)
		} else {
			phases[0] = append(phases[0], p)
		}
		if i < len(order)-1 {
			if err := b.deleteAll(ctx); err != nil {
				return nil, err
			}
			if err := b.settle(ctx, res.BackgroundCores["all"]); err != nil {
				return nil, err
			}
		}
	}
	res.Native, res.Reclaimed = mergePhases(phases[0]), mergePhases(phases[1])
	if res.Native.PodsPerSecond > 0 {
		res.Ratio = res.Reclaimed.PodsPerSecond / res.Native.PodsPerSecond
	}
	printScheduler(b.out, res)
	return res, nil
}

// mergePhases sums the timed phases of one kind into one: pods, times and
// the rate over both; per-pod means weighted by the pods each bound; the
// latency percentiles the larger of the phases' (they cannot be merged
// without the samples).
func mergePhases(ps []phaseResult) phaseResult {
	if len(ps) == 0 {
		return phaseResult{}
	}
	m := phaseResult{Kind: ps[0].Kind}
	// A mean counts the phases that measured it (a scrape may fail).
	type mean struct {
		dst *map[string]float64
		w   float64
	}
	means := []*mean{{dst: &m.ExtenderMeanMs}, {dst: &m.NodesPerCall}, {dst: &m.CPUPerPodMs}, {dst: &m.APIPerPod}, {dst: &m.ExtenderBusyPerPod}}
	var algoW float64
	var notes []string
	for _, p := range ps {
		m.Pods += p.Pods
		m.Bound += p.Bound
		m.CreateSeconds += p.CreateSeconds
		m.Seconds += p.Seconds
		m.BindP50ms, m.BindP99ms = max(m.BindP50ms, p.BindP50ms), max(m.BindP99ms, p.BindP99ms)
		w := float64(p.Bound)
		if p.AlgorithmMeanMs > 0 {
			m.AlgorithmMeanMs += p.AlgorithmMeanMs * w
			algoW += w
		}
		for i, src := range []map[string]float64{p.ExtenderMeanMs, p.NodesPerCall, p.CPUPerPodMs, p.APIPerPod, p.ExtenderBusyPerPod} {
			if len(src) == 0 {
				continue
			}
			mn := means[i]
			if *mn.dst == nil {
				*mn.dst = map[string]float64{}
			}
			for k, v := range src {
				(*mn.dst)[k] += v * w
			}
			mn.w += w
		}
		if p.Note != "" {
			notes = append(notes, p.Note)
		}
	}
	if algoW > 0 {
		m.AlgorithmMeanMs /= algoW
	}
	for _, mn := range means {
		for k := range *mn.dst {
			if mn.w > 0 {
				(*mn.dst)[k] /= mn.w
			}
		}
	}
	if m.Seconds > 0 {
		m.PodsPerSecond = float64(m.Bound) / m.Seconds
	}
	m.Note = strings.Join(notes, "; ")
	return m
}

func printScheduler(out io.Writer, r *schedulerResult) {
	fmt.Fprintf(out, "\n%-14s %6s %6s %10s %10s %8s %10s %10s %6s %6s\n", "kind", "pods", "bound", "creates s", "total s", "pods/s", "p50 ms", "p99 ms", "idle", "steal")
	row := func(label string, p phaseResult, machine bool) {
		fmt.Fprintf(out, "%-14s %6d %6d %10.2f %10.2f %8.1f %10.0f %10.0f", label, p.Pods, p.Bound, p.CreateSeconds, p.Seconds, p.PodsPerSecond, p.BindP50ms, p.BindP99ms)
		if machine {
			fmt.Fprintf(out, " %6.2f %6.2f", p.IdleCores, p.StealCores)
		}
		fmt.Fprintln(out)
	}
	for i, p := range r.Phases {
		row(fmt.Sprintf("%d. %s", i+1, p.Kind), p, true)
	}
	for _, p := range []phaseResult{r.Reclaimed, r.Native} {
		row(p.Kind+" (both)", p, false)
	}
	fmt.Fprintln(out, "idle and steal: the machine's idle and stolen CPU during the phase, in cores")
	fmt.Fprintf(out, "%s topology: ratio reclaimed/native: %.2f (goal %s); %d nodes", r.Topology, r.Ratio, r.Topology.goal(), r.Nodes)
	if r.ExtenderQPS > 0 {
		fmt.Fprintf(out, ", extender --kube-api-qps=%d", r.ExtenderQPS)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "kube-scheduler mean scheduling algorithm time per pod (the serial part of its cycle): reclaimed %.2f ms, native %.2f ms\n",
		r.Reclaimed.AlgorithmMeanMs, r.Native.AlgorithmMeanMs)
	if m := r.Reclaimed.ExtenderMeanMs; len(m) > 0 {
		fmt.Fprintf(out, "extender mean server time during the reclaimed phases: %s\n", byVerb(m, "%.2f ms"))
	}
	if b := r.Reclaimed.ExtenderBusyPerPod; len(b) > 0 {
		fmt.Fprintf(out, "extender calls answered 429 (busy: every in-flight slot of the verb taken) per reclaimed pod: %s\n", byVerb(b, "%.3f"))
	}
	if n := r.Reclaimed.NodesPerCall; len(n) > 0 {
		fmt.Fprintf(out, "nodes per extender call during the reclaimed phases (profile %s, percentageOfNodesToScore %d): %s\n",
			extender.SchedulerName, r.PercentageOfNodesToScore, byVerb(n, "%.0f"))
	}
	if len(r.Reclaimed.CPUPerPodMs) > 0 && len(r.Native.CPUPerPodMs) > 0 {
		fmt.Fprintf(out, "CPU per pod bound beyond the background, ms, by process (background in cores):\n%-24s %10s %10s %10s\n", "process", "reclaimed", "native", "background")
		names := slices.Sorted(maps.Keys(r.Reclaimed.CPUPerPodMs))
		for _, name := range names {
			fmt.Fprintf(out, "%-24s %10.2f %10.2f %10.2f\n", name, r.Reclaimed.CPUPerPodMs[name], r.Native.CPUPerPodMs[name], r.BackgroundCores[name])
		}
	}
	if len(r.Reclaimed.APIPerPod) > 0 && len(r.Native.APIPerPod) > 0 {
		fmt.Fprintf(out, "kube-apiserver requests and watch events sent per pod bound:\n%-40s %10s %10s\n", "request or event", "reclaimed", "native")
		keys := slices.Sorted(maps.Keys(r.Reclaimed.APIPerPod))
		for k := range r.Native.APIPerPod {
			if _, ok := r.Reclaimed.APIPerPod[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			fmt.Fprintf(out, "%-40s %10.2f %10.2f\n", k, r.Reclaimed.APIPerPod[k], r.Native.APIPerPod[k])
		}
	}
	for _, p := range []phaseResult{r.Reclaimed, r.Native} {
		if p.Note != "" {
			fmt.Fprintf(out, "%s: %s\n", p.Kind, p.Note)
		}
	}
}

// profileScheduler starts reading kube-scheduler's CPU profile and then its
// execution trace while a phase runs (when --profile-dir is set) and
// returns a wait for both to be written.
func (b *schedBench) profileScheduler(ctx context.Context, reclaimed bool) func() error {
	if b.cfg.profileDir == "" {
		return func() error { return nil }
	}
	kind := "native"
	if reclaimed {
		kind = "reclaimed"
	}
	var g errgroup.Group
	n := b.profiles[kind]
	b.profiles[kind]++
	if b.extPprof != "" {
		g.Go(func() error {
			body, err := httpGet(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=8", b.extPprof))
			if err != nil {
				return fmt.Errorf("extender profile: %w", err)
			}
			return os.WriteFile(filepath.Join(b.cfg.profileDir, fmt.Sprintf("extender-%s-%d.pprof", kind, n+1)), body, 0o644)
		})
	}
	g.Go(func() error {
		for _, get := range []struct{ path, file string }{
			{"/debug/pprof/profile?seconds=4", "kube-scheduler-" + string(b.topo) + "-" + kind + ".pprof"},
			{"/debug/pprof/trace?seconds=2", "kube-scheduler-" + string(b.topo) + "-" + kind + ".trace"},
		} {
			body, err := b.c.SchedulerGet(ctx, get.path)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(b.cfg.profileDir, get.file), body, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait
}

// rssLine lists each process's resident memory, to tell a process that
// grows from one phase to the next.
func (b *schedBench) rssLine() string {
	var parts []string
	for _, name := range []string{cluster.APIServer, cluster.Etcd, cluster.Scheduler, stack.Extender, cluster.Kwok} {
		if p := b.c.Process(name); p != nil {
			if st, err := readProcStats(p.PID()); err == nil {
				parts = append(parts, fmt.Sprintf("%s %.0f", name, st.RSSMB))
			}
		}
	}
	if st, err := readProcStats(os.Getpid()); err == nil {
		parts = append(parts, fmt.Sprintf("bench %.0f", st.RSSMB))
	}
	return "RSS MB: " + strings.Join(parts, ", ")
}

// benchProcess names this process in CPUPerPodMs.
const benchProcess = "bench (pod creators)"

// processCPU reads the CPU time used so far by each process that shares the
// machine during a phase.
func (b *schedBench) processCPU() map[string]time.Duration {
	pids := map[string]int{benchProcess: os.Getpid()}
	for _, name := range []string{cluster.Etcd, cluster.APIServer, cluster.ControllerManager, cluster.Scheduler, cluster.Kwok, stack.Extender} {
		if p := b.c.Process(name); p != nil {
			pids[name] = p.PID()
		}
	}
	out := make(map[string]time.Duration, len(pids))
	for name, pid := range pids {
		if s, err := readProcStats(pid); err == nil {
			out[name] = s.CPU
		}
	}
	return out
}

// machineCPU is the machine's idle (iowait included) and stolen CPU time so
// far, from /proc/stat; zero where it cannot be read.
type machineCPU struct{ idle, steal float64 }

func readMachineCPU() machineCPU {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return machineCPU{}
	}
	st, err := fs.Stat()
	if err != nil {
		return machineCPU{}
	}
	return machineCPU{idle: st.CPUTotal.Idle + st.CPUTotal.Iowait, steal: st.CPUTotal.Steal}
}

// since returns the idle and stolen cores between before and m, over d.
func (m machineCPU) since(before machineCPU, d time.Duration) (idle, steal float64) {
	return (m.idle - before.idle) / d.Seconds(), (m.steal - before.steal) / d.Seconds()
}

// backgroundWindow is how long the processes' background use is measured.
const backgroundWindow = 10 * time.Second

const (
	// warmupSettle is the pause between the warm-up's deletions and the
	// background's measurement.
	warmupSettle = 5 * time.Second
	// settleMargin and settleMax: before a timed phase, the machine's CPU
	// use must have come back to within settleMargin cores of the
	// background over one second, or settleMax passed. Without it a phase
	// paid for the previous phase's deletions, which every process is
	// still watching when the last pod is gone from the API.
	settleMargin = 0.2
	settleMax    = 20 * time.Second
)

// settle waits until the processes' CPU use over one second is within
// settleMargin cores of background (or settleMax passed), and says how
// long that took.
func (b *schedBench) settle(ctx context.Context, background float64) error {
	start := time.Now()
	var rate float64
	for time.Since(start) < settleMax {
		before, t0 := b.processCPU(), time.Now()
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		rate = cpuRate(before, b.processCPU(), time.Since(t0))["all"]
		if rate <= background+settleMargin {
			b.step("settled after the deletions in %.0fs (%.2f cores, background %.2f)", time.Since(start).Seconds(), rate, background)
			return nil
		}
	}
	b.step("not settled after %s (%.2f cores, background %.2f); timing anyway", settleMax, rate, background)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// cpuRate is each process's CPU time between before and after over d, in
// cores, with their sum under "all". A process missing at either end is
// left out: its share is unknown.
func cpuRate(before, after map[string]time.Duration, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	var all time.Duration
	for name, a := range after {
		if b, ok := before[name]; ok {
			out[name] = float64(a-b) / float64(d)
			all += a - b
		}
	}
	out["all"] = float64(all) / float64(d)
	return out
}

// cpuPerPod is each process's CPU time between before and after beyond its
// background rate over the phase's duration d, per pod bound, in ms.
func cpuPerPod(before, after map[string]time.Duration, background map[string]float64, d time.Duration, pods int) map[string]float64 {
	if pods == 0 {
		return nil
	}
	out := cpuRate(before, after, d)
	for name, cores := range out {
		out[name] = (cores - background[name]) * d.Seconds() * 1000 / float64(pods)
	}
	return out
}

func waitReady(ctx context.Context, c *cluster.Cluster, name, url string, timeout time.Duration) error {
	exited := false
	err := pollOK(ctx, url, timeout, 200*time.Millisecond, func() error {
		if p := c.Process(name); p == nil || !p.Running() {
			exited = true
			return fmt.Errorf("%s exited:\n%s", name, tail(p))
		}
		return nil
	})
	if err != nil && !exited && ctx.Err() == nil {
		return fmt.Errorf("%s: %w:\n%s", name, err, tail(c.Process(name)))
	}
	return err
}

func tail(p *cluster.Process) string {
	if p == nil {
		return ""
	}
	return p.Tail(3000)
}

// annotate writes a fresh annotation with generous room on every node, and
// the same room into its capacity and allocatable.
func (b *schedBench) annotate(ctx context.Context, nodes []string) error {
	now := time.Now().UTC().Truncate(time.Second)
	a := reclaimable.Annotation{CPUMilli: 32000, MemoryBytes: 128 << 30, Policy: "usage", MetricsTime: now, WriteTime: now}
	v, err := a.Marshal()
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{b.names.Annotation: v}}})
	if err != nil {
		return err
	}
	room := map[string]string{string(b.names.CPU): strconv.FormatInt(a.CPUMilli, 10), string(b.names.Memory): strconv.FormatInt(a.MemoryBytes, 10)}
	status, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": room, "allocatable": room}})
	if err != nil {
		return err
	}
	return parallel(ctx, len(nodes), 32, func(i int) error {
		if _, err := b.client.CoreV1().Nodes().Patch(ctx, nodes[i], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		_, err := b.client.CoreV1().Nodes().Patch(ctx, nodes[i], types.MergePatchType, status, metav1.PatchOptions{}, "status")
		return err
	})
}

// parallel runs f(0..n-1), at most workers at a time, and returns the first
// error.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error { return f(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func (b *schedBench) waitServiceAccount(ctx context.Context) error {
	for range 300 {
		if _, err := b.client.CoreV1().ServiceAccounts(benchNS).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("no default ServiceAccount in the bench namespace")
}

// watchBound records when each pod of the namespace is first seen bound.
func (b *schedBench) watchBound() func() {
	factory := informers.NewSharedInformerFactoryWithOptions(b.client, 0, informers.WithNamespace(benchNS))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		b.mu.Lock()
		if _, done := b.bound[pod.UID]; !done {
			b.bound[pod.UID] = now
		}
		b.mu.Unlock()
		select {
		case b.boundCh <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }})
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return func() { close(stop); factory.Shutdown() }
}

func (b *schedBench) pod(name string, reclaimed bool) *corev1.Pod {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(b.cfg.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(b.cfg.memBytes, resource.BinarySI),
	}
	if reclaimed {
		rl = corev1.ResourceList{
			b.names.CPU:    *resource.NewQuantity(b.cfg.cpuMilli, resource.DecimalSI),
			b.names.Memory: *resource.NewQuantity(b.cfg.memBytes, resource.BinarySI),
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "job", Image: "registry.example/batch:1",
				Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}},
		},
	}
	if reclaimed {
		pod.Spec.SchedulerName = extender.SchedulerName
		// What the pod webhook does at admission (no webhook runs here):
		// the deployed extender refuses reclaimed pods without it.
		if _, err := enforcement.Enforce(&pod.Spec, b.names); err != nil {
			panic(fmt.Sprintf("bench pod cannot be enforced: %v", err))
		}
	}
	return pod
}

// phase creates n pods of one kind with the configured number of workers
// and waits until all are bound (or the phase timeout).
func (b *schedBench) phase(ctx context.Context, label string, reclaimed bool, n int) (phaseResult, error) {
	kind := "native"
	if reclaimed {
		kind = "reclaimed"
	}
	p := phaseResult{Kind: kind, Pods: n}
	var (
		mu      sync.Mutex
		created = make(map[types.UID]time.Time, n)
		lastAck time.Time
	)
	start := time.Now()
	err := parallel(ctx, n, b.cfg.workers, func(i int) error {
		pod, err := b.client.CoreV1().Pods(benchNS).Create(ctx, b.pod(fmt.Sprintf("%s-%s-%04d", label, kind, i), reclaimed), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		now := time.Now()
		mu.Lock()
		created[pod.UID] = now
		lastAck = now
		mu.Unlock()
		return nil
	})
	if err != nil {
		return p, err
	}
	p.CreateSeconds = lastAck.Sub(start).Seconds()
	deadline := time.After(b.cfg.phaseTimeout)
	for {
		var last time.Time
		var lat []time.Duration
		b.mu.Lock()
		for uid, t0 := range created {
			if t, ok := b.bound[uid]; ok {
				lat = append(lat, t.Sub(t0))
				last = maxTime(last, t)
			}
		}
		b.mu.Unlock()
		p.Bound = len(lat)
		if p.Bound == n {
			p.Seconds = last.Sub(start).Seconds()
			p.PodsPerSecond = float64(n) / p.Seconds
			s := summarize(lat)
			p.BindP50ms, p.BindP99ms = ms(s.P50), ms(s.P99)
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-deadline:
			p.Seconds = time.Since(start).Seconds()
			p.PodsPerSecond = float64(p.Bound) / p.Seconds
			p.Note = fmt.Sprintf("only %d of %d pods bound within %s; %s", p.Bound, n, b.cfg.phaseTimeout, b.whyPending(ctx))
			return p, nil
		case <-b.boundCh:
		case <-time.After(time.Second):
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// whyPending returns the latest FailedScheduling message in the namespace.
func (b *schedBench) whyPending(ctx context.Context) string {
	evs, err := b.client.CoreV1().Events(benchNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil || len(evs.Items) == 0 {
		return "no FailedScheduling event; see the logs in " + b.c.Dir()
	}
	return "last FailedScheduling: " + evs.Items[len(evs.Items)-1].Message
}

// deleteAll force-deletes every pod of the namespace, one request per pod
// (a DeleteCollection of a thousand pods can outlive the apiserver's
// request timeout on a busy machine), and waits until they are gone, so the
// next phase starts from empty nodes.
func (b *schedBench) deleteAll(ctx context.Context) error {
	zero := int64(0)
	for attempt := 0; attempt < 5; attempt++ {
		l, err := b.client.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		err = parallel(ctx, len(l.Items), b.cfg.workers, func(i int) error {
			err := b.client.CoreV1().Pods(benchNS).Delete(ctx, l.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil && ctx.Err() != nil {
			return err
		}
		// Errors are retried with what is left.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return errors.New("pods of the previous phase were not deleted in time")
}

// byVerb lists the verbs m has a figure for (those called during the
// phase), in the order kube-scheduler calls them, each formatted by format.
func byVerb(m map[string]float64, format string) string {
	var parts []string
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		if v, ok := m[verb]; ok {
			parts = append(parts, verb+" "+fmt.Sprintf(format, v))
		}
	}
	return strings.Join(parts, ", ")
}

// busyPerPod is the extender's calls answered 429 between two scrapes of
// its request histogram, by route, per pod bound; every route that had one
// (unlike perPod, no share is too small to show).
func busyPerPod(before, after map[string]*dto.MetricFamily, pods int) map[string]float64 {
	count := func(families map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		for _, m := range families[extenderDurationMetric].GetMetric() {
			if labelValue(m, "code") == strconv.Itoa(http.StatusTooManyRequests) {
				out[labelValue(m, "route")] += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return out
	}
	b, out := count(before), map[string]float64{}
	for route, a := range count(after) {
		if d := a - b[route]; d > 0 && pods > 0 {
			out[route] = d / float64(pods)
		}
	}
	return out
}

// verbTime is the sum and count of a request histogram.
type verbTime struct{ sum, count float64 }

const extenderDurationMetric = "kube_reclaim_extender_http_request_duration_seconds"

// nodesPerCallMetric is the extender's histogram of node names per call.
const nodesPerCallMetric = "kube_reclaim_extender_nodes_per_call"

// verbTimes sums the histogram metric's observations by the value of label
// (all other labels together).
func verbTimes(families map[string]*dto.MetricFamily, metric, label string) map[string]verbTime {
	out := map[string]verbTime{}
	for _, m := range families[metric].GetMetric() {
		route := labelValue(m, label)
		t := out[route]
		t.sum += m.GetHistogram().GetSampleSum()
		t.count += float64(m.GetHistogram().GetSampleCount())
		out[route] = t
	}
	return out
}

// algorithmTime reads kube-scheduler's scheduling algorithm histogram.
func (b *schedBench) algorithmTime(ctx context.Context) (verbTime, error) {
	body, err := b.c.SchedulerMetrics(ctx)
	if err != nil {
		return verbTime{}, err
	}
	families, err := parseExposition(bytes.NewReader(body))
	if err != nil {
		return verbTime{}, err
	}
	return verbTimes(families, "scheduler_scheduling_algorithm_duration_seconds", "route")[""], nil
}

// meanDelta is the mean observation per route between two scrapes, times
// scale (1000 turns seconds into milliseconds).
func meanDelta(before, after map[string]verbTime, scale float64) map[string]float64 {
	out := map[string]float64{}
	for route, a := range after {
		b := before[route]
		if n := a.count - b.count; n > 0 {
			out[route] = (a.sum - b.sum) / n * scale
		}
	}
	return out
}

// apiCounts reads kube-apiserver's request counts by verb, resource and
// subresource ("POST pods/binding"), and its watch events sent by resource
// ("watch event pods").
func (b *schedBench) apiCounts(ctx context.Context) (map[string]float64, error) {
	body, err := b.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	families, err := parseExposition(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := labelMap(m)
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += m.GetCounter().GetValue()
	}
	for _, m := range families["apiserver_watch_events_total"].GetMetric() {
		out["watch event "+labelMap(m)["resource"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

func labelMap(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// perPod returns after - before per pod, leaving out what is under 0.05
// per pod (the background of leases and heartbeats).
func perPod(before, after map[string]float64, pods int) map[string]float64 {
	out := map[string]float64{}
	if pods == 0 {
		return out
	}
	for k, a := range after {
		if v := (a - before[k]) / float64(pods); v >= 0.05 {
			out[k] = v
		}
	}
	return out
}

// pprofEnv is pprofwrap's environment variable (package main there).
const pprofEnv = "KUBE_RECLAIM_BENCH_PPROF"

// buildProfiled builds hack/bench/pprofwrap into dir and picks its
// profiler's loopback address.
func buildProfiled(ctx context.Context, dir string) (bin, addr string, err error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "kube-reclaim-pprof")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/bench/pprofwrap")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./hack/bench/pprofwrap: %w\n%s", err, out)
	}
	port, err := cluster.FreePort()
	if err != nil {
		return "", "", err
	}
	return bin, fmt.Sprintf("127.0.0.1:%d", port), nil
}

// httpGet reads url's body, failing on any status but 200.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// schedulerSetup is how a topology's scheduler process runs: the binary in
// kube-scheduler's place (empty: upstream kube-scheduler), its extra
// configuration, and the extender beside it, if any.
type schedulerSetup struct {
	// binaryName names the scheduler process for the log.
	binary, binaryName, config string
	// percentage is the reclaimed profile's percentageOfNodesToScore.
	percentage int32
	// placement says how reclaimed pods are placed, for the log.
	placement string
	extender  *extenderProcess
}

// extenderProcess is the extender topology's kube-reclaim process.
type extenderProcess struct {
	bin                           string
	env                           []string
	port, healthPort, metricsPort int
}

// extenderSetup builds kube-reclaim and configures upstream kube-scheduler
// with the shipped profile and the extender, as deploy/default does.
func (b *schedBench) extenderSetup(ctx context.Context, tmp string) (schedulerSetup, error) {
	bin, err := stack.BuildBinary(ctx, tmp)
	if err != nil {
		return schedulerSetup{}, err
	}
	ext := &extenderProcess{bin: bin}
	if b.cfg.profileDir != "" {
		// The same code with a profiler on loopback (pprofwrap).
		if ext.bin, b.extPprof, err = buildProfiled(ctx, tmp); err != nil {
			return schedulerSetup{}, err
		}
		ext.env = append(ext.env, pprofEnv+"="+b.extPprof)
	}
	for _, port := range []*int{&ext.port, &ext.healthPort, &ext.metricsPort} {
		if *port, err = cluster.FreePort(); err != nil {
			return schedulerSetup{}, err
		}
	}
	extCfg, err := extender.ExtenderConfigYAML(fmt.Sprintf("http://127.0.0.1:%d", ext.port), reclaimable.DefaultDomain)
	if err != nil {
		return schedulerSetup{}, err
	}
	reclaimedProfile, err := extender.ReclaimedProfile(extender.SchedulerName, reclaimable.DefaultDomain, extender.StrategySpread)
	if err != nil {
		return schedulerSetup{}, err
	}
	profiles, err := extender.ProfilesYAML(extender.DefaultProfile(corev1.DefaultSchedulerName), reclaimedProfile)
	if err != nil {
		return schedulerSetup{}, err
	}
	return schedulerSetup{binaryName: cluster.Scheduler, config: profiles + extCfg, percentage: extender.PercentageOfNodesToScore,
		placement: "extender configured", extender: ext}, nil
}

// pluginSetup configures kube-reclaim-scheduler (built once into the
// binary cache) with pluginProfiles.
func (b *schedBench) pluginSetup(ctx context.Context) (schedulerSetup, error) {
	bin, err := cluster.EnsurePluginScheduler(ctx, b.out)
	if err != nil {
		return schedulerSetup{}, err
	}
	profiles, percentage, err := pluginProfiles()
	if err != nil {
		return schedulerSetup{}, err
	}
	return schedulerSetup{binary: bin, binaryName: "kube-reclaim-scheduler in kube-scheduler's place", config: profiles, percentage: percentage,
		placement: "the placement plugin as deploy/" + stack.PluginOverlay + " configures it, no extender"}, nil
}

// pluginProfiles is the plugin topology's `profiles:`: the default profile
// for native pods beside deploy/plugin-scheduler's profile for reclaimed
// ones, with no publisher Lease to wait for; and that profile's
// percentageOfNodesToScore.
func pluginProfiles() (string, int32, error) {
	profile, err := stack.PluginSchedulerProfile()
	if err != nil {
		return "", 0, err
	}
	if profile.SchedulerName == nil || *profile.SchedulerName != extender.SchedulerName {
		return "", 0, fmt.Errorf("deploy/%s's profile is %v, the bench's reclaimed pods ask for %s", stack.PluginOverlay, profile.SchedulerName, extender.SchedulerName)
	}
	// No publisher runs: the annotation's write time alone bounds
	// staleness (the extender topology's --publisher-lease-name=).
	if err := setPluginArg(&profile, "publisherLeaseName", "-"); err != nil {
		return "", 0, err
	}
	profiles, err := extender.ProfilesYAML(extender.DefaultProfile(corev1.DefaultSchedulerName), profile)
	if err != nil {
		return "", 0, err
	}
	var percentage int32
	if profile.PercentageOfNodesToScore != nil {
		percentage = *profile.PercentageOfNodesToScore
	}
	return profiles, percentage, nil
}

// pluginName is the placement plugin's name in a profile.
const pluginName = "KubeReclaim"

// setPluginArg sets one of the placement plugin's args in profile.
func setPluginArg(profile *configv1.KubeSchedulerProfile, key string, value any) error {
	for i, pc := range profile.PluginConfig {
		if pc.Name != pluginName {
			continue
		}
		args := map[string]any{}
		if len(pc.Args.Raw) > 0 {
			if err := json.Unmarshal(pc.Args.Raw, &args); err != nil {
				return fmt.Errorf("%s args: %w", pluginName, err)
			}
		}
		args[key] = value
		raw, err := json.Marshal(args)
		if err != nil {
			return err
		}
		profile.PluginConfig[i].Args = runtime.RawExtension{Raw: raw}
		return nil
	}
	return fmt.Errorf("the profile has no %s args", pluginName)
}

// startExtender runs the extender as deploy/default configures it, with
// this machine's addresses, and waits until it is ready.
func (b *schedBench) startExtender(ctx context.Context, ext *extenderProcess) error {
	c := b.c
	dep, err := stack.LoadDeployed("default")
	if err != nil {
		return err
	}
	args := append([]string{stack.Extender, "--kubeconfig=" + c.Kubeconfig()}, dep.Args[stack.Extender]...)
	args = append(args, fmt.Sprintf("--listen-address=127.0.0.1:%d", ext.port), fmt.Sprintf("--health-address=127.0.0.1:%d", ext.healthPort),
		fmt.Sprintf("--metrics-address=127.0.0.1:%d", ext.metricsPort),
		// No publisher runs: the annotation's write time alone bounds staleness.
		"--publisher-lease-name=",
		fmt.Sprintf("--kube-api-qps=%d", b.cfg.extenderQPS), fmt.Sprintf("--kube-api-burst=%d", 2*b.cfg.extenderQPS))
	args = append(args, strings.Fields(b.cfg.extenderArgs)...)
	if err := c.StartProcessWithEnv(stack.Extender, ext.bin, append(slices.Clone(dep.Env[stack.Extender]), ext.env...), args...); err != nil {
		return err
	}
	if err := waitReady(ctx, c, stack.Extender, fmt.Sprintf("http://127.0.0.1:%d/readyz", ext.healthPort), 2*time.Minute); err != nil {
		return err
	}
	b.step("extender running as deploy/default configures it: %v kube-reclaim %v", dep.Env[stack.Extender], args[1:])
	return nil
}
