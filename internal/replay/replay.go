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
	testingclock "k8s.io/utils/clock/testing"

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
	// The controller logs every dry-run victim at info.
	if lvl := logrus.GetLevel(); lvl > logrus.WarnLevel {
		logrus.SetLevel(logrus.WarnLevel)
		defer logrus.SetLevel(lvl)
	}
	step := tr.Step
	asm := policyinput.New(reclaimable.Names{})
	var age time.Duration
	for _, c := range contenders {
		if c.Settings != nil {
			if err := c.Settings.Validate(c.Name); err != nil {
				return nil, err
			}
			age = max(age, policyinput.HistoryAge(&policy.Config{Default: *c.Settings}, cfg.MetricsStaleAfter))
		}
	}
	asm.Resize(max(age, step+policy.DefaultSampleAlignment), step)

	timeline := 0
	for i, n := range tr.Nodes {
		if n.Name == cfg.TimelineNode {
			timeline = i
		}
	}
	if cfg.TimelineNode != "" && tr.Nodes[timeline].Name != cfg.TimelineNode {
		return nil, fmt.Errorf("--timeline-node %q: no such node", cfg.TimelineNode)
	}

	clk := testingclock.NewFakeClock(tr.Start)
	states := make([]*contenderState, len(contenders))
	for i, c := range contenders {
		st := &contenderState{c: c, nodes: make([]nodeState, len(tr.Nodes)), rec: &victimRecorder{}}
		opts := cfg.Eviction
		opts.Mode = eviction.ModeDryRun
		nodeIdx := map[string]int{}
		for j, n := range tr.Nodes {
			nodeIdx[n.Name] = j
		}
		st.ctrl = eviction.New(eviction.Config{Options: opts, Period: cfg.Period, Clock: clk,
			Pods: func(node string) []*policyinput.Pod { return st.nodes[nodeIdx[node]].batch }}, prometheus.NewRegistry())
		st.ctrl.SetRecorder(st.rec)
		st.res = &Result{Name: c.Name, Describe: c.Describe, Baseline: c.Baseline || c.Formula != nil, Nodes: make([]NodeResult, len(tr.Nodes))}
		if i == 0 {
			st.res.Timeline = &Timeline{Node: tr.Nodes[timeline].Name, Start: tr.Start, Step: step,
				Allocatable: tr.Nodes[timeline].Allocatable}
		}
		states[i] = st
	}

	// One record per pod, kept across steps: the assembler caches each
	// pod's series in it, as the publisher's cache does.
	records := make([]*policyinput.Pod, len(tr.Pods))
	keys := make([][]byte, len(tr.Pods))
	for i, p := range tr.Pods {
		first := tr.Start.Add(time.Duration(p.First) * step).Unix()
		records[i] = &policyinput.Pod{Namespace: "trace", Name: p.Name, UID: types.UID("trace/" + p.Name),
			Requests: p.Requests, Created: first, Started: first}
		keys[i] = []byte("trace/" + p.Name)
	}
	usage := make([]reclaimable.Resources, len(tr.Nodes))
	var present []*policyinput.Pod
	base := make([]baseInput, len(tr.Nodes))

	for k := 0; k < tr.Steps; k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := tr.Start.Add(time.Duration(k) * step)
		clk.SetTime(now)
		hist := asm.History()
		for i, p := range tr.Pods {
			if j := k - p.First; p.Node >= 0 && j >= 0 && j < len(p.Kind) && p.Kind[j] != kindGap {
				hist.AddPod(keys[i], policy.Sample{Time: now, CPUMilli: p.CPU[j], MemoryBytes: p.Memory[j]})
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
			usage[n] = u
			base[n].push(u, req)
			hist.AddNode(tr.Nodes[n].Name, policy.Sample{Time: now, CPUMilli: u.CPUMilli, MemoryBytes: u.MemoryBytes})
		}
		// Batch pods that ran their lifetime have completed.
		for _, st := range states {
			for n := range st.nodes {
				ns := &st.nodes[n]
				kept := ns.batch[:0]
				for _, b := range ns.batch {
					if now.Unix()-b.Created >= int64(cfg.BatchLifetime/time.Second) {
						ns.held.CPUMilli -= b.Reclaimed.CPUMilli
						ns.held.MemoryBytes -= b.Reclaimed.MemoryBytes
						continue
					}
					kept = append(kept, b)
				}
				clear(ns.batch[len(kept):])
				ns.batch = kept
			}
		}
		// The room written at the previous step was in force until now:
		// judge it against the usage that followed.
		if k > 0 {
			for _, st := range states {
				for n := range tr.Nodes {
					ns := &st.nodes[n]
					ns.acc.interval(ns.room, usage[n], tr.Nodes[n].Allocatable)
				}
			}
		}
		for n, node := range tr.Nodes {
			present = present[:0]
			for _, i := range node.Pods {
				if p := tr.Pods[i]; k >= p.First && k <= p.Last() {
					present = append(present, records[i])
				}
			}
			in, _ := asm.Node(node.Name, node.Allocatable, node.Allocatable, present)
			for _, st := range states {
				ns := &st.nodes[n]
				var res policy.Result
				threshold := policy.DefaultChangeThreshold
				if st.c.Settings != nil {
					res = st.calc.Compute(&in, *st.c.Settings, now, cfg.MetricsStaleAfter)
					threshold = st.c.Settings.ChangeThreshold
				} else {
					res = policy.Result{Resources: st.c.Formula.Room(node.Allocatable, &base[n])}
				}
				st.ctrl.Observe(node.Name, res, ns.held)
				d := policy.Decide(policy.Observed{Published: ns.published, Status: ns.status, Held: ns.held}, res.Resources, now,
					policy.Gate{ChangeThreshold: threshold, DecreaseThreshold: cfg.DecreaseThreshold, Refresh: cfg.Refresh})
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
		for _, st := range states {
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
					kept := ns.batch[:0]
					for _, b := range ns.batch {
						if evicted[b.UID] {
							ns.acc.evictions++
							ns.held.CPUMilli -= b.Reclaimed.CPUMilli
							ns.held.MemoryBytes -= b.Reclaimed.MemoryBytes
							continue
						}
						kept = append(kept, b)
					}
					clear(ns.batch[len(kept):])
					ns.batch = kept
				}
				// Batch work fills whatever room is free.
				if free := (reclaimable.Resources{CPUMilli: max(ns.room.CPUMilli-ns.held.CPUMilli, 0),
					MemoryBytes: max(ns.room.MemoryBytes-ns.held.MemoryBytes, 0)}); !free.IsZero() {
					ns.seq++
					name := fmt.Sprintf("%s-%d", tr.Nodes[n].Name, ns.seq)
					ns.batch = append(ns.batch, &policyinput.Pod{Namespace: "batch", Name: name, UID: types.UID("batch/" + name),
						NodeName: tr.Nodes[n].Name, Reclaimed: free, Created: now.Unix(), Started: now.Unix()})
					ns.held = ns.held.Add(free)
				}
			}
			if tl := st.res.Timeline; tl != nil {
				ev := st.nodes[timeline].acc.evictions
				tl.Usage = append(tl.Usage, usage[timeline])
				tl.Room = append(tl.Room, st.nodes[timeline].room)
				tl.Evictions = append(tl.Evictions, ev-tl.total)
				tl.total = ev
			}
		}
		asm.Prune(now)
	}
	rep := &Report{Trace: summarize(tr)}
	for _, st := range states {
		var cluster accumulator
		for n := range st.nodes {
			acc := &st.nodes[n].acc
			acc.finish()
			st.res.Nodes[n] = NodeResult{Name: tr.Nodes[n].Name, Pods: len(tr.Nodes[n].Pods), Measures: acc.measures(tr.Nodes[n].Allocatable, step)}
			cluster.add(acc)
		}
		st.res.Cluster = cluster.measures(tr.Nodes[0].Allocatable, step)
		rep.Results = append(rep.Results, *st.res)
	}
	return rep, nil
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
