package publisher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/compactlist"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/watchhealth"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Publisher is a running publisher.
type Publisher struct {
	opts     *Options
	names    reclaimable.Names
	client   kubernetes.Interface
	metrics  metricsclient.Interface
	recorder record.EventRecorder
	m        *metrics
	evictor  *eviction.Controller

	nodes     cache.Store
	pods      *podStore
	hasSynced []cache.InformerSynced
	// nodeWatch and podWatch see the informers' list and watch calls
	// (liveness).
	nodeWatch, podWatch *watchhealth.Watch

	config atomic.Pointer[policy.Config]

	// Usage history and input assembly (shared with kubectl reclaim
	// simulate); touched only by the cycle goroutine, like the calculator
	// and the pods grouped by node.
	assembler *policyinput.Assembler
	calc      policy.Calculator
	// podsByNode is the cycle's copy of the pods grouped by node
	// (groupPods).
	podsByNode map[string][]*policyinput.Pod
	// reclaimedUsage is the eviction observation's buffer, reused from
	// node to node.
	reclaimedUsage []eviction.PodUsage

	// Built by New, started by Run: the policy file, the probes and
	// metrics server, and the leader elector (nil without leader election)
	// with the identity it writes in the Lease.
	file      *policyfile.File
	health    *serving.Health
	endpoints serving.Endpoints
	elector   *leaderelection.LeaderElector
	identity  string
	// watchdog fails /healthz when this replica leads but has not renewed
	// its Lease for two lease durations (leaderlease.Watchdog).
	watchdog *leaderlease.Watchdog

	leading        atomic.Bool
	firstCycleDone atomic.Bool
	// progress is the unix-nano instant of the leader's last progress: its
	// informers synced, a cycle finished or a node write ended. 0 until the
	// cycles start.
	progress atomic.Int64
	// published remembers which nodes have per-node gauges of the room, to
	// delete them; held the value of each node's held gauges; pools which
	// pools have per-pool gauges.
	published map[string]bool
	held      map[string]reclaimable.Resources
	pools     map[string]bool
}

// errLostLeadership ends Run when another replica may already be writing.
var errLostLeadership = errors.New("lost leadership")

// Run builds the publisher from the flags and runs it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	return cli.Run(ctx, &o.Common, o, New)
}

// New builds a publisher from its flags: everything that can fail before it
// serves (the policy file, the API clients, the metrics endpoints, the
// leader elector) fails here.
func New(o *Options) (*Publisher, error) {
	file, err := policyfile.Load(o.ConfigFile, o.ConfigReloadInterval)
	if err != nil {
		return nil, err
	}
	if err := checkPools(file.Config(), o); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", o.ConfigFile, err)
	}
	restCfg, err := o.RESTConfig("kube-reclaim-publisher")
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	mc, err := metricsclient.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	p := newPublisher(o, client, mc, reg)
	p.file = file
	p.config.Store(file.Config())
	file.OnReload = p.configReloaded
	p.health = serving.NewHealth(reg)
	if p.endpoints, err = o.Endpoints("kube-reclaim-publisher"); err != nil {
		return nil, err
	}
	p.addReadyChecks()
	p.addLiveChecks()
	if o.LeaderElection.LeaderElect {
		if p.elector, err = p.leaderElector(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Run serves the probes and metrics, watches the policy file, fills the
// informers and, once leading (or at once without leader election), runs
// the cycles until ctx ends or a part fails; the first to fail or end stops
// every part. It returns that failure, or nil on a clean shutdown.
func (p *Publisher) Run(ctx context.Context) error {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	p.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-reclaim-publisher"})
	p.evictor.SetRecorder(p.recorder)

	// The informers end with the group's context, which ends when the
	// group does; Run returns once they have.
	var informers sync.WaitGroup
	defer informers.Wait()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.health.Serve(ctx, p.endpoints) })
	g.Go(func() error { p.file.Run(ctx); return nil })
	p.startInformers(ctx, &informers)
	g.Go(func() error { return p.lead(ctx) })
	return cli.Wait(g)
}

// addReadyChecks makes /readyz fail until the informers synced and, on the
// leader, the first cycle is done.
func (p *Publisher) addReadyChecks() {
	p.health.AddReadyCheck("informers", func() error {
		for _, s := range p.hasSynced {
			if !s() {
				return errors.New("informers not synced")
			}
		}
		return nil
	})
	p.health.AddReadyCheck("first-cycle", func() error {
		// A standby replica is ready once synced: it has nothing to publish.
		if p.leading.Load() && !p.firstCycleDone.Load() {
			return errors.New("first publish cycle not finished")
		}
		return nil
	})
}

// addLiveChecks makes /healthz fail when the publisher is stuck: its
// informers stopped or cannot list and watch, the leader makes no progress
// (checkProgress), or it holds the Lease without renewing it.
func (p *Publisher) addLiveChecks() {
	p.health.AddLiveCheck("informers", watchhealth.Checks(p.nodeWatch, p.podWatch))
	p.health.AddLiveCheck("cycle", p.checkProgress)
	p.health.AddLiveCheck("leader-election", p.watchdog.Check)
}

// checkProgress fails when this replica leads and has neither finished a
// cycle nor ended a node write for --cycle-deadline since its informers
// synced. Node writes count so that a first cycle writing thousands of
// nodes (at 50 writes a second) is not taken for a stuck one; each of them
// ends within --write-timeout. A standby, and a leader waiting for its
// informers to sync (a list of every pod, however long it takes; the
// informers' own check says when their calls fail), pass.
func (p *Publisher) checkProgress() error {
	last := p.progress.Load()
	if !p.leading.Load() || last == 0 {
		return nil
	}
	deadline := p.opts.cycleDeadline()
	if d := time.Since(time.Unix(0, last)); d > deadline {
		return fmt.Errorf("leading, and no cycle finished and no node write ended for %s (--cycle-deadline %s)", d.Round(time.Second), deadline)
	}
	return nil
}

// progressed records the leader's progress for checkProgress.
func (p *Publisher) progressed() { p.progress.Store(time.Now().UnixNano()) }

// lead runs the cycles while this replica leads (always without leader
// election). Losing the lease while ctx goes on is an error: another replica
// may already be writing, so the process must stop at once and restart.
func (p *Publisher) lead(ctx context.Context) error {
	if p.elector == nil {
		p.cycles(ctx)
		return nil
	}
	p.elector.Run(ctx)
	if ctx.Err() == nil && p.leading.Load() {
		logrus.WithField("identity", p.identity).Error("lost the leader lease; exiting so that only one replica writes")
		return errLostLeadership
	}
	return nil
}

// cycles marks this replica leading and runs the cycles until ctx ends.
func (p *Publisher) cycles(ctx context.Context) {
	p.leading.Store(true)
	p.m.leader.Set(1)
	p.loop(ctx)
}

// newPublisher builds a publisher over the given clients without starting
// it; New and the tests build it the same way.
func newPublisher(o *Options, client kubernetes.Interface, mc metricsclient.Interface, reg prometheus.Registerer) *Publisher {
	p := &Publisher{opts: o, names: o.Names(), client: client, metrics: mc, m: newMetrics(reg, o.PerNodeMetrics),
		published: map[string]bool{}, held: map[string]reclaimable.Resources{}, pools: map[string]bool{}, pods: newPodStore(), podsByNode: map[string][]*policyinput.Pod{}}
	p.nodeWatch, p.podWatch = watchhealth.New("nodes", watchhealth.DefaultStall), watchhealth.New("pods", watchhealth.DefaultStall)
	p.watchdog = leaderlease.NewWatchdog(o.LeaderElection.ResourceNamespace+"/"+o.LeaderElection.ResourceName, o.LeaderElection.LeaseDuration.Duration)
	p.evictor = eviction.New(eviction.Config{Options: o.Eviction, Period: o.Period, MetricsStaleAfter: o.MetricsStaleAfter,
		Timeout: o.WriteTimeout, Client: client, Pods: p.podsOn}, reg)
	p.config.Store(policy.Default())
	p.assembler = policyinput.New(p.names)
	return p
}

// startInformers starts the node informer and the pod reflector in wg. Both are
// fed through compactlist, so they hold records (nodeRecord,
// policyinput.Pod), and listing 150,000 pods never holds more than a page of
// full Pods. Finished pods hold nothing (the policy skips them), and a
// cluster keeps many: the apiserver leaves them out. Pods go to the
// publisher's own store (podStore), nodes to the informer's.
func (p *Publisher) startInformers(ctx context.Context, wg *sync.WaitGroup) {
	core := p.client.CoreV1()
	podLW := p.podWatch.ListerWatcher(compactlist.New(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = policyinput.NonTerminalPods
			return core.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = policyinput.NonTerminalPods
			return core.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, policyinput.PodRecords(p.names)))
	// The conversion looks the previous record up through p.nodes when a
	// node arrives: the informer's store exists only once the informer
	// does, and the informer is built from this conversion.
	nodeLW := p.nodeWatch.ListerWatcher(compactlist.New(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Nodes().Watch(ctx, o)
		},
	}, nodeRecords(p.names, func(name string) *nodeRecord { return storedNode(p.nodes, name) })))
	pods := cache.NewReflectorWithOptions(podLW, &policyinput.Pod{}, p.pods, cache.ReflectorOptions{Name: "pods", TypeDescription: "pods"})
	nodeInf := cache.NewSharedIndexInformerWithOptions(nodeLW, &nodeRecord{}, cache.SharedIndexInformerOptions{ObjectDescription: "nodes"})
	p.nodes = nodeInf.GetIndexer()
	p.hasSynced = []cache.InformerSynced{nodeInf.HasSynced, p.pods.hasSynced}
	wg.Go(func() { p.nodeWatch.Run(ctx, nodeInf) })
	wg.Go(func() { p.podWatch.Run(ctx, pods) })
}

// leaderElector builds the elector of --leader-elect-*; its identity is
// hostname_<random> unless --leader-elect-identity names one.
func (p *Publisher) leaderElector() (*leaderelection.LeaderElector, error) {
	e := p.opts.LeaderElection
	p.identity = e.Identity
	if p.identity == "" {
		host, _ := os.Hostname()
		p.identity = host + "_" + rand.String(8)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMetaNamed(e.ResourceNamespace, e.ResourceName),
		Client:     p.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            p.watchdog.Lock(lock),
		LeaseDuration:   e.LeaseDuration.Duration,
		RenewDeadline:   e.RenewDeadline.Duration,
		RetryPeriod:     e.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            e.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logrus.WithField("identity", p.identity).Info("became leader")
				p.cycles(ctx)
			},
			OnStoppedLeading: func() { p.m.leader.Set(0) },
			OnNewLeader: func(leader string) {
				if leader != p.identity {
					logrus.WithField("leader", leader).Info("following leader")
				}
			},
		},
	})
	if err != nil {
		return nil, err
	}
	p.watchdog.Watch(le)
	return le, nil
}

func (p *Publisher) loop(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), p.hasSynced...) {
		return
	}
	p.progressed()
	t := time.NewTicker(p.opts.Period)
	defer t.Stop()
	for {
		p.Cycle(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Cycle reads usage, evaluates every node, and writes what the gate lets
// through. Exported for benchmarks.
func (p *Publisher) Cycle(ctx context.Context) {
	start := time.Now()
	p.collect(ctx)
	cfg := p.config.Load()
	now := time.Now()
	nodes := p.nodes.List()
	p.groupPods()
	outcomes := make([]outcome, 0, len(nodes))
	zero := map[string]int{}
	seen := make(map[string]bool, len(nodes))
	for _, obj := range nodes {
		node, ok := obj.(*nodeRecord)
		if !ok {
			continue
		}
		seen[node.Name] = true
		o, res := p.evaluate(node, cfg, now)
		if res.ZeroReason != "" {
			zero[res.ZeroReason]++
		}
		outcomes = append(outcomes, o)
	}
	deferred := deferRefreshes(outcomes, refreshBudget(len(nodes), p.opts.Period, p.opts.RefreshInterval))
	p.m.refreshesDeferred.Add(float64(deferred))
	writes := make([]write, 0, 16)
	for _, o := range outcomes {
		if o.write != nil {
			writes = append(writes, *o.write)
		}
	}
	p.setValues(outcomes)
	p.forgetGone(seen)
	p.runWrites(ctx, writes)
	// After the writes: the lowered room is published before anything is
	// evicted, so the freed room is not handed straight to new batch pods.
	p.evictor.Act(ctx)
	for _, r := range []string{policy.ZeroReasonStale, policy.ZeroReasonNoSamples, policy.ZeroReasonInvalidSettings} {
		p.m.zeroNodes.WithLabelValues(r).Set(float64(zero[r]))
	}
	p.m.nodesEvaluated.Set(float64(len(nodes)))
	p.m.cycleDuration.Observe(time.Since(start).Seconds())
	p.firstCycleDone.Store(true)
	p.progressed()
	logrus.WithFields(logrus.Fields{"nodes": len(nodes), "writes": len(writes), "stale": zero[policy.ZeroReasonStale],
		"duration": time.Since(start).Round(time.Millisecond)}).Debug("cycle done")
}

// outcome is what one cycle does for one node: the write (nil: none) and the
// room the node carries once it is done; and what the value gauges read of
// the node (setValues): its pool, what its reclaimed pods hold and what its
// regular pods requested and leave unused.
type outcome struct {
	write  *write
	room   reclaimable.Resources
	node   string
	pool   string
	held   reclaimable.Resources
	unused reclaimable.Resources
}

// minRefreshesPerCycle: up to this many refreshes due at once are all
// written in the cycle (2 s of writes at the deployed 50 QPS).
const minRefreshesPerCycle = 100

// refreshBudget is how many refreshes one cycle writes: twice the steady
// rate (every node once per refresh interval), at least
// minRefreshesPerCycle. Refreshes come due together, all of them one
// interval after the first cycle, which writes every node and stamps every
// annotation with its own start: written in one cycle, 5,000 of them held
// that cycle for 100 s at 50 QPS, with no usage read and no node evaluated
// meanwhile, and the wave came back every interval. At twice the steady
// rate a wave spreads over half an interval at most, so no annotation is
// older than one and a half refresh intervals, and the nodes' refreshes
// drift apart from then on.
func refreshBudget(nodes int, period, refresh time.Duration) int {
	if period <= 0 || refresh <= 0 {
		return nodes
	}
	steady := float64(nodes) * period.Seconds() / refresh.Seconds()
	return max(minRefreshesPerCycle, int(math.Ceil(2*steady)))
}

// deferRefreshes keeps the budget's worth of the outcomes' refreshes, the
// oldest annotations first, and leaves the others for a later cycle: their
// write is dropped and their room is what the node already carries. Only a
// refresh that writes the annotation alone waits; one that must fix the
// status too (kubelet admits against it) is written at once, as is every
// other reason. It returns how many refreshes it deferred.
func deferRefreshes(outcomes []outcome, budget int) int {
	var due []int
	for i, o := range outcomes {
		if o.write != nil && o.write.reason == policy.PublishRefresh && !o.write.status {
			due = append(due, i)
		}
	}
	if len(due) <= budget {
		return 0
	}
	slices.SortStableFunc(due, func(a, b int) int {
		wa, wb := outcomes[a].write, outcomes[b].write
		if c := wa.written.Compare(wb.written); c != 0 {
			return c
		}
		return strings.Compare(wa.node, wb.node)
	})
	for _, i := range due[budget:] {
		o := &outcomes[i]
		o.room, o.write = o.write.carried, nil
	}
	return len(due) - budget
}

// write is the work for one node: the annotation (when set) and the status
// values (when status is set), as the policy's Decision says, sent together.
type write struct {
	node       string
	annotation string
	// values are the room (the annotation's values); floor is the status
	// value, max(room, held).
	values, floor reclaimable.Resources
	reason        string
	// status: the status does not carry floor yet and must be written too.
	status bool
	// carried and written are the room and the write time of the
	// annotation the node carries (zero without one).
	carried reclaimable.Resources
	written time.Time
}

// evaluate decides what to write for one node, if anything, and returns it
// with the room the node carries once that is written.
func (p *Publisher) evaluate(node *nodeRecord, cfg *policy.Config, now time.Time) (outcome, policy.Result) {
	settings, pool := cfg.For(node.Labels)
	in, held := p.assembler.Node(node.Name, node.Capacity, node.Allocatable, p.podsByNode[node.Name])
	res := p.calc.Compute(&in, settings, now, p.opts.MetricsStaleAfter)
	measured := eviction.Measure(&in, res, held, settings.Eviction, now, p.opts.MetricsStaleAfter, p.reclaimedUsage)
	p.evictor.Observe(measured)
	p.reclaimedUsage = measured.Reclaimed
	o := outcome{node: node.Name, pool: pool, held: held,
		unused: unusedRequests(in.Pods, now, policy.MetricsStaleAfter(p.opts.MetricsStaleAfter))}

	obs := policy.Observed{Status: node.Status, Held: held, Published: node.Published}
	d := policy.Decide(obs, res.Resources, now, policy.Gate{ChangeThreshold: settings.ChangeThreshold,
		DecreaseThreshold: p.opts.DecreaseThreshold, Refresh: p.opts.RefreshInterval})
	o.room = d.Room
	if !d.Writes() {
		return o, res
	}
	w := &write{node: node.Name, values: d.Room, floor: d.Floor, reason: d.Reason, status: d.WriteStatus}
	if obs.Published != nil {
		w.carried, w.written = obs.Published.Room, obs.Published.WriteTime
	}
	if d.WriteAnnotation {
		expl := res.Explanation
		held := d.Held
		ann := reclaimable.Annotation{CPUMilli: d.Room.CPUMilli, MemoryBytes: d.Room.MemoryBytes, Held: &held, Policy: string(res.Policy),
			Pool: pool, MetricsTime: res.MetricsTime, WriteTime: now.UTC().Truncate(time.Second), ZeroReason: res.ZeroReason, Explanation: &expl}
		value, err := ann.Marshal()
		if err != nil {
			logrus.WithError(err).WithField("node", node.Name).Error("encoding annotation")
			return o, res
		}
		w.annotation = value
	}
	o.write = w
	return o, res
}

// podsOn returns the pods bound to a node as the cycle grouped them, for the
// eviction controller: the pods the node's room was computed from.
func (p *Publisher) podsOn(node string) []*policyinput.Pod {
	return slices.Clone(p.podsByNode[node])
}

// groupPods copies the pods grouped by node for this cycle: the cycle and
// the eviction controller read one grouping while the informer goes on.
func (p *Publisher) groupPods() { p.pods.snapshot(p.podsByNode) }

func (p *Publisher) forgetGone(seen map[string]bool) {
	if !p.opts.PerNodeMetrics {
		return
	}
	for name := range p.published {
		if !seen[name] {
			p.m.publishedCPU.DeleteLabelValues(name)
			p.m.publishedMem.DeleteLabelValues(name)
			delete(p.published, name)
		}
	}
	for name := range p.held {
		if !seen[name] {
			p.m.heldCPU.DeleteLabelValues(name)
			p.m.heldMem.DeleteLabelValues(name)
			delete(p.held, name)
		}
	}
}

// runWrites performs the writes, p.opts.Workers at a time. Every node has
// its own deadline, so one failing node cannot hold up the others.
func (p *Publisher) runWrites(ctx context.Context, writes []write) {
	workqueue.ParallelizeUntil(ctx, p.opts.Workers, len(writes), func(i int) {
		w := writes[i]
		if err := p.write(ctx, w); err != nil {
			logrus.WithError(err).WithFields(logrus.Fields{"node": w.node, "reason": w.reason}).Warn("publishing failed; retrying next cycle")
		}
		p.progressed()
	})
	if !p.opts.PerNodeMetrics {
		return
	}
	for _, w := range writes {
		p.m.publishedCPU.WithLabelValues(w.node).Set(float64(w.values.CPUMilli))
		p.m.publishedMem.WithLabelValues(w.node).Set(float64(w.values.MemoryBytes))
		p.published[w.node] = true
	}
}

// write publishes w in one API write. writes_total counts it once, by what
// it carries: "annotation" (with the status values when they changed too) or
// "status" (the status values alone, e.g. after another writer changed them).
func (p *Publisher) write(ctx context.Context, w write) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.WriteTimeout)
	defer cancel()
	kind := writeStatus
	if w.annotation != "" {
		kind = writeAnnotation
	}
	if err := retryWrite(ctx, func(ctx context.Context) error { return p.patchNode(ctx, w) }); err != nil {
		p.m.writeErrors.WithLabelValues(kind).Inc()
		return fmt.Errorf("%s: %w", kind, err)
	}
	p.m.writes.WithLabelValues(kind, w.reason).Inc()
	logrus.WithFields(logrus.Fields{"node": w.node, "cpu": w.values.CPUMilli, "memory": w.values.MemoryBytes,
		"status": w.status, "reason": w.reason}).Debug("published")
	return nil
}

func quantity(v int64) string { return resource.NewQuantity(v, resource.DecimalSI).String() }
