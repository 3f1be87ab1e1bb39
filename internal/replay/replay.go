// Package replay runs a usage trace through the publisher's own policy code
// and usage history (policy.Calculator, policy.Decide, policyinput's
// Assembler and the eviction controller) and measures what each policy
// would have reclaimed and how often the room it published was not there.
// docs/design.md ("Replay") defines every measure; this package is the
// engine of `kubectl reclaim simulate --history` and of the bench.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	validationfield "k8s.io/apimachinery/pkg/util/validation/field"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-reclaim/kube-reclaim/apis/policy/v1alpha1"
	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Contender is one policy of a run: the product's policy under Settings, or
// a baseline computed outside it (Baseline).
type Contender struct {
	Name string
	// Settings run through policy.Compute; nil for a baseline.
	Settings *policy.Settings
	// Formula is a baseline the product's policy cannot express; nil for a
	// policy.
	Formula Baseline
	// Baseline: a reference to compare with, not a candidate default (a
	// Formula always is).
	Baseline bool
	// Describe says what it is, for the report.
	Describe string
}

// Config is what the replay assumes of the publisher around the policy.
type Config struct {
	// DecreaseThreshold and Refresh are the publisher's --decrease-threshold
	// and --refresh-interval (policy.Gate); the change threshold is each
	// policy's own.
	DecreaseThreshold float64
	Refresh           time.Duration
	// MetricsStaleAfter is --metrics-stale-after.
	MetricsStaleAfter time.Duration
	// Period is the publisher's --period, from which the eviction grace
	// defaults (two periods).
	Period time.Duration
	// Eviction are the controller's options; the mode is always dry-run
	// (nothing is evicted, the victims are counted and leave the replay).
	Eviction eviction.Options
	// BatchLifetime is how long a batch pod runs before it completes and
	// gives its room back (unless evicted first).
	BatchLifetime time.Duration
	// TimelineNode is the node whose timeline the report keeps, under the
	// first contender; empty: the first node.
	TimelineNode string
}

// DefaultConfig is the publisher's defaults.
func DefaultConfig() Config {
	return Config{DecreaseThreshold: 0.10, Refresh: reclaimable.DefaultRefreshInterval,
		MetricsStaleAfter: reclaimable.DefaultMetricsStaleAfter, Period: 15 * time.Second, Eviction: eviction.NewOptions(),
		BatchLifetime: time.Hour}
}

// contenderState is one contender's view of the cluster.
type contenderState struct {
	c     Contender
	calc  policy.Calculator
	ctrl  *eviction.Controller
	rec   *victimRecorder
	nodes []nodeState
	res   *Result
}

// nodeState is what one node carries under one contender.
type nodeState struct {
	published *policy.Published
	status    *reclaimable.Resources
	// room is the annotation's room: in force until the next write.
	room  reclaimable.Resources
	batch []*policyinput.Pod
	held  reclaimable.Resources
	seq   int
	acc   accumulator
}

// Run replays tr under every contender. The trace's pods are the regular
// work; batch pods are placed by the replay to fill each node's room
// whenever it rises, and evicted by the eviction controller.
func Run(ctx context.Context, tr *Trace, contenders []Contender, cfg Config) (*Report, error) {
	if len(contenders) == 0 {
		return nil, errors.New("no policy to replay")
	}
	if cfg.BatchLifetime < tr.Step {
		return nil, fmt.Errorf("the batch pods' lifetime %s is shorter than the step %s", cfg.BatchLifetime, tr.Step)
	}
	if len(tr.Nodes) == 0 {
		return nil, errors.New("the trace places no pod on a node")
	}
	age, err := historyAge(contenders, cfg)
	if err != nil {
		return nil, err
	}
	timeline, err := timelineNode(tr, cfg)
	if err != nil {
		return nil, err
	}
	// The controller logs every dry-run victim at info.
	if lvl := logrus.GetLevel(); lvl > logrus.WarnLevel {
		logrus.SetLevel(logrus.WarnLevel)
		defer logrus.SetLevel(lvl)
	}
	r := newRun(tr, contenders, cfg, age, timeline)
	for k := 0; k < tr.Steps; k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.step(ctx, k)
	}
	return r.report(), nil
}

// historyAge checks the contenders' settings and returns the usage history
// the longest of their windows needs.
func historyAge(contenders []Contender, cfg Config) (time.Duration, error) {
	var age time.Duration
	for _, c := range contenders {
		if c.Settings != nil {
			if errs := v1alpha1.ValidateSettings(*c.Settings, validationfield.NewPath(c.Name)); len(errs) > 0 {
				return 0, errs.ToAggregate()
			}
			age = max(age, policyinput.HistoryAge(&policy.Config{Default: *c.Settings}, cfg.MetricsStaleAfter))
		}
	}
	return age, nil
}

// timelineNode is the index of the node whose timeline the report keeps.
func timelineNode(tr *Trace, cfg Config) (int, error) {
	timeline := 0
	for i, n := range tr.Nodes {
		if n.Name == cfg.TimelineNode {
			timeline = i
		}
	}
	if cfg.TimelineNode != "" && tr.Nodes[timeline].Name != cfg.TimelineNode {
		return 0, fmt.Errorf("--timeline-node %q: no such node", cfg.TimelineNode)
	}
	return timeline, nil
}

// run is one replay in progress.
type run struct {
	tr       *Trace
	cfg      Config
	asm      *policyinput.Assembler
	clk      *testingclock.FakeClock
	states   []*contenderState
	timeline int
	// One record per pod, kept across steps: the assembler caches each
	// pod's series in it, as the publisher's cache does.
	records []*policyinput.Pod
	keys    [][]byte
	// usage is each node's usage at the current step, base the baselines'
	// input.
	usage   []reclaimable.Resources
	base    []baseInput
	present []*policyinput.Pod
}

func newRun(tr *Trace, contenders []Contender, cfg Config, age time.Duration, timeline int) *run {
	r := &run{tr: tr, cfg: cfg, asm: policyinput.New(reclaimable.Names{}), clk: testingclock.NewFakeClock(tr.Start),
		timeline: timeline, records: make([]*policyinput.Pod, len(tr.Pods)), keys: make([][]byte, len(tr.Pods)),
		usage: make([]reclaimable.Resources, len(tr.Nodes)), base: make([]baseInput, len(tr.Nodes))}
	r.asm.Resize(max(age, tr.Step+policy.DefaultSampleAlignment), tr.Step)
	for i, c := range contenders {
		r.states = append(r.states, r.newContenderState(c, i == 0))
	}
	for i, p := range tr.Pods {
		first := tr.Start.Add(time.Duration(p.First) * tr.Step).Unix()
		r.records[i] = &policyinput.Pod{Namespace: "trace", Name: p.Name, UID: types.UID("trace/" + p.Name),
			Requests: p.Requests, Created: first, Started: first}
		r.keys[i] = []byte("trace/" + p.Name)
	}
	return r
}

// newContenderState gives the contender its own eviction controller, in
// dry-run, on the replay's clock; the first contender keeps the timeline.
func (r *run) newContenderState(c Contender, first bool) *contenderState {
	tr := r.tr
	st := &contenderState{c: c, nodes: make([]nodeState, len(tr.Nodes)), rec: &victimRecorder{}}
	opts := r.cfg.Eviction
	opts.Mode = eviction.ModeDryRun
	nodeIdx := map[string]int{}
	for j, n := range tr.Nodes {
		nodeIdx[n.Name] = j
	}
	st.ctrl = eviction.New(eviction.Config{Options: opts, Period: r.cfg.Period, MetricsStaleAfter: r.cfg.MetricsStaleAfter, Clock: r.clk,
		Pods: func(node string) []*policyinput.Pod { return st.nodes[nodeIdx[node]].batch }}, prometheus.NewRegistry())
	st.ctrl.SetRecorder(st.rec)
	st.res = &Result{Name: c.Name, Describe: c.Describe, Baseline: c.Baseline || c.Formula != nil, Nodes: make([]NodeResult, len(tr.Nodes))}
	if first {
		st.res.Timeline = &Timeline{Node: tr.Nodes[r.timeline].Name, Start: tr.Start, Step: tr.Step,
			Allocatable: tr.Nodes[r.timeline].Allocatable}
	}
	return st
}

// step replays step k: the usage of that instant, completed batch pods, the
// judgement of the room in force since the previous step, each contender's
// new room, then evictions and new batch pods.
func (r *run) step(ctx context.Context, k int) {
	now := r.tr.Start.Add(time.Duration(k) * r.tr.Step)
	r.clk.SetTime(now)
	r.recordUsage(k, now)
	// Batch pods that ran their lifetime have completed.
	lifetime := int64(r.cfg.BatchLifetime / time.Second)
	for _, st := range r.states {
		for n := range st.nodes {
			st.nodes[n].removeBatch(func(b *policyinput.Pod) bool { return now.Unix()-b.Created >= lifetime })
		}
	}
	// The room written at the previous step was in force until now:
	// judge it against the usage that followed.
	if k > 0 {
		for _, st := range r.states {
			for n := range r.tr.Nodes {
				ns := &st.nodes[n]
				ns.acc.interval(ns.room, r.usage[n], r.tr.Nodes[n].Allocatable)
			}
		}
	}
	for n := range r.tr.Nodes {
		r.decideNode(k, n, now)
	}
	for _, st := range r.states {
		r.evictAndFill(ctx, st, now)
	}
	r.asm.Prune(now)
}

// recordUsage adds the samples of step k to the history: each pod's, and
// each node's as the sum of its pods'.
func (r *run) recordUsage(k int, now time.Time) {
	tr := r.tr
	hist := r.asm.History()
	for i, p := range tr.Pods {
		if j := k - p.First; p.Node >= 0 && j >= 0 && j < len(p.Kind) && p.Kind[j] != kindGap {
			hist.AddPod(r.keys[i], policy.Sample{Time: now, CPUMilli: p.CPU[j], MemoryBytes: p.Memory[j]})
		}
	}
	for n := range tr.Nodes {
		var u, req reclaimable.Resources
		for _, i := range tr.Nodes[n].Pods {
			p := tr.Pods[i]
			if j := k - p.First; j >= 0 && j < len(p.Kind) {
				u = u.Add(reclaimable.Resources{CPUMilli: p.CPU[j], MemoryBytes: p.Memory[j]})
				req = req.Add(p.Requests)
			}
		}
		r.usage[n] = u
		r.base[n].push(u, req)
		hist.AddNode(tr.Nodes[n].Name, policy.Sample{Time: now, CPUMilli: u.CPUMilli, MemoryBytes: u.MemoryBytes})
	}
}

// decideNode computes node n's room under every contender and gates its
// write as the publisher does.
func (r *run) decideNode(k, n int, now time.Time) {
	node := &r.tr.Nodes[n]
	r.present = r.present[:0]
	for _, i := range node.Pods {
		if p := r.tr.Pods[i]; k >= p.First && k <= p.Last() {
			r.present = append(r.present, r.records[i])
		}
	}
	in, _ := r.asm.Node(node.Name, node.Allocatable, node.Allocatable, r.present)
	for _, st := range r.states {
		ns := &st.nodes[n]
		var res policy.Result
		threshold := policy.DefaultChangeThreshold
		ev := policy.DefaultEviction()
		if st.c.Settings != nil {
			res = st.calc.Compute(&in, *st.c.Settings, now, r.cfg.MetricsStaleAfter)
			threshold = st.c.Settings.ChangeThreshold
			ev = st.c.Settings.Eviction
		} else {
			res = policy.Result{Resources: st.c.Formula.Room(node.Allocatable, &r.base[n]), MetricsTime: now}
		}
		// The trace measures the regular pods; the replay's batch pods
		// have no usage of their own yet, so they add none.
		obs := eviction.Measure(&in, res, ns.held, ev, now, r.cfg.MetricsStaleAfter, nil)
		st.ctrl.Observe(obs)
		d := policy.Decide(policy.Observed{Published: ns.published, Status: ns.status, Held: ns.held}, res.Resources, now,
			policy.Gate{ChangeThreshold: threshold, DecreaseThreshold: r.cfg.DecreaseThreshold, Refresh: r.cfg.Refresh})
		if d.WriteAnnotation {
			ns.published = &policy.Published{Values: d.Values, Held: d.Held, WriteTime: now}
			ns.acc.writes++
		}
		if d.WriteStatus {
			s := d.Status
			ns.status = &s
		}
		ns.room = d.Values
	}
}

// evictAndFill runs the contender's eviction controller, removes its
// victims, fills each node's free room with a new batch pod and extends the
// timeline.
func (r *run) evictAndFill(ctx context.Context, st *contenderState, now time.Time) {
	st.rec.victims = st.rec.victims[:0]
	st.ctrl.Act(ctx)
	var evicted map[types.UID]bool
	if len(st.rec.victims) > 0 {
		evicted = make(map[types.UID]bool, len(st.rec.victims))
		for _, v := range st.rec.victims {
			evicted[v] = true
		}
	}
	for n := range st.nodes {
		ns := &st.nodes[n]
		if len(evicted) > 0 {
			ns.acc.evictions += ns.removeBatch(func(b *policyinput.Pod) bool { return evicted[b.UID] })
		}
		// Batch work fills whatever room is free.
		if free := (reclaimable.Resources{CPUMilli: max(ns.room.CPUMilli-ns.held.CPUMilli, 0),
			MemoryBytes: max(ns.room.MemoryBytes-ns.held.MemoryBytes, 0)}); !free.IsZero() {
			ns.seq++
			name := fmt.Sprintf("%s-%d", r.tr.Nodes[n].Name, ns.seq)
			ns.batch = append(ns.batch, &policyinput.Pod{Namespace: "batch", Name: name, UID: types.UID("batch/" + name),
				NodeName: r.tr.Nodes[n].Name, Reclaimed: free, Created: now.Unix(), Started: now.Unix()})
			ns.held = ns.held.Add(free)
		}
	}
	if tl := st.res.Timeline; tl != nil {
		ev := st.nodes[r.timeline].acc.evictions
		tl.Usage = append(tl.Usage, r.usage[r.timeline])
		tl.Room = append(tl.Room, st.nodes[r.timeline].room)
		tl.Evictions = append(tl.Evictions, ev-tl.total)
		tl.total = ev
	}
}

// removeBatch removes the batch pods for which gone returns true, gives
// back what they held and returns how many it removed.
func (ns *nodeState) removeBatch(gone func(*policyinput.Pod) bool) int {
	kept := ns.batch[:0]
	for _, b := range ns.batch {
		if gone(b) {
			ns.held.CPUMilli -= b.Reclaimed.CPUMilli
			ns.held.MemoryBytes -= b.Reclaimed.MemoryBytes
			continue
		}
		kept = append(kept, b)
	}
	removed := len(ns.batch) - len(kept)
	clear(ns.batch[len(kept):])
	ns.batch = kept
	return removed
}

// report measures every contender over the whole replay.
func (r *run) report() *Report {
	tr := r.tr
	rep := &Report{Trace: summarize(tr)}
	for _, st := range r.states {
		var cluster accumulator
		for n := range st.nodes {
			acc := &st.nodes[n].acc
			acc.finish()
			st.res.Nodes[n] = NodeResult{Name: tr.Nodes[n].Name, Pods: len(tr.Nodes[n].Pods), Measures: acc.measures(tr.Nodes[n].Allocatable, tr.Step)}
			cluster.add(acc)
		}
		st.res.Cluster = cluster.measures(tr.Nodes[0].Allocatable, tr.Step)
		rep.Results = append(rep.Results, *st.res)
	}
	return rep
}

// victimRecorder takes the controller's Events: a dry-run Event on a Pod
// names a pod the controller chose, which the replay then removes as the
// Eviction API would have.
type victimRecorder struct{ victims []types.UID }

func (r *victimRecorder) Event(obj runtime.Object, _, reason, _ string) {
	if ref, ok := obj.(*corev1.ObjectReference); ok && ref.Kind == "Pod" && reason == eviction.ReasonDryRun {
		r.victims = append(r.victims, ref.UID)
	}
}

func (r *victimRecorder) Eventf(obj runtime.Object, eventtype, reason, _ string, _ ...any) {
	r.Event(obj, eventtype, reason, "")
}

func (r *victimRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, _ string, _ ...any) {
	r.Event(obj, eventtype, reason, "")
}
