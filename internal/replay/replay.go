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

	"github.com/sirupsen/logrus"
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
	// Eviction are the controller's options; on runs as dry-run (nothing is
	// evicted, the victims are counted and leave the replay), off evicts
	// nothing.
	Eviction eviction.Options
	// BatchLifetime is how long a batch job runs before it completes and
	// gives its room back, unless evicted first.
	BatchLifetime time.Duration
	// BatchPod is the largest batch pod: free room is filled with as many
	// pods as the larger of free CPU ÷ BatchPod CPU and free memory ÷
	// BatchPod memory (rounded down), sharing the free room equally; room
	// smaller than one pod on both resources waits.
	BatchPod reclaimable.Resources
	// Outages are times during which no usage sample reaches the publisher
	// (metrics-server down): the policy sees its samples go stale.
	Outages []Outage
	// TimelineNode is the node whose timeline the report keeps, under the
	// first contender; empty: the busiest node (the largest mean usage, as
	// a share of allocatable, of CPU and memory together).
	TimelineNode string
}

// Outage is a time without usage samples, from From (included) to To
// (excluded).
type Outage struct{ From, To time.Time }

// DefaultBatchPod is the replay's default batch pod: one core and 4 GiB,
// the shape of the trace's nodes (32 cores, 128 GiB).
var DefaultBatchPod = reclaimable.Resources{CPUMilli: 1000, MemoryBytes: 4 << 30}

// DefaultConfig is the publisher's defaults.
func DefaultConfig() Config {
	return Config{DecreaseThreshold: 0.10, Refresh: reclaimable.DefaultRefreshInterval,
		MetricsStaleAfter: reclaimable.DefaultMetricsStaleAfter, Period: 15 * time.Second, Eviction: eviction.NewOptions(),
		BatchLifetime: time.Hour, BatchPod: DefaultBatchPod}
}

// contenderState is one contender's view of the cluster.
type contenderState struct {
	c     Contender
	calc  policy.Calculator
	ev    *evictor
	nodes []nodeState
	res   *Result
}

// nodeState is what one node carries under one contender.
type nodeState struct {
	published *policy.Published
	status    reclaimable.Resources
	// room is the annotation's room: in force until the next write.
	room  reclaimable.Resources
	stale bool
	batch []*policyinput.Pod
	held  reclaimable.Resources
	seq   int
	acc   accumulator
}

// Run replays tr under every contender. The trace's pods are the regular
// work; batch pods are placed by the replay to fill each node's room
// whenever it rises, run their lifetime and leave earlier only when the
// eviction controller evicts them.
func Run(ctx context.Context, tr *Trace, contenders []Contender, cfg Config) (*Report, error) {
	if len(contenders) == 0 {
		return nil, errors.New("no policy to replay")
	}
	if cfg.BatchLifetime < tr.Step {
		return nil, fmt.Errorf("the batch pods' lifetime %s is shorter than the step %s", cfg.BatchLifetime, tr.Step)
	}
	if cfg.BatchPod.CPUMilli <= 0 || cfg.BatchPod.MemoryBytes <= 0 {
		return nil, fmt.Errorf("the batch pod %v must ask some CPU and some memory", cfg.BatchPod)
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

// timelineNode is the index of the node whose timeline the report keeps:
// the one named, or the busiest.
func timelineNode(tr *Trace, cfg Config) (int, error) {
	if cfg.TimelineNode != "" {
		for i, n := range tr.Nodes {
			if n.Name == cfg.TimelineNode {
				return i, nil
			}
		}
		return 0, fmt.Errorf("--timeline-node %q: no such node", cfg.TimelineNode)
	}
	busiest, most := 0, -1.0
	for i, n := range tr.Nodes {
		var load float64
		for _, p := range n.Pods {
			for j := range tr.Pods[p].Kind {
				load += float64(tr.Pods[p].CPU[j])/float64(n.Allocatable.CPUMilli) +
					float64(tr.Pods[p].Memory[j])/float64(n.Allocatable.MemoryBytes)
			}
		}
		if load > most {
			busiest, most = i, load
		}
	}
	return busiest, nil
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
	st := &contenderState{c: c, nodes: make([]nodeState, len(tr.Nodes))}
	nodeIdx := make(map[string]int, len(tr.Nodes))
	for j, n := range tr.Nodes {
		nodeIdx[n.Name] = j
	}
	st.ev = newEvictor(r.cfg, r.clk, func(node string) []*policyinput.Pod { return st.nodes[nodeIdx[node]].batch })
	st.res = &Result{Name: c.Name, Describe: c.Describe, Baseline: c.Baseline || c.Formula != nil, Nodes: make([]NodeResult, len(tr.Nodes))}
	if first {
		st.res.Timeline = &Timeline{Node: tr.Nodes[r.timeline].Name, Start: tr.Start, Step: tr.Step,
			Allocatable: tr.Nodes[r.timeline].Allocatable}
	}
	return st
}

// step replays step k: the usage of that instant, the judgement of what was
// in force since the previous step, completed batch jobs, each contender's
// new room, then evictions and new batch pods.
func (r *run) step(ctx context.Context, k int) {
	now := r.tr.Start.Add(time.Duration(k) * r.tr.Step)
	r.clk.SetTime(now)
	r.recordUsage(k, now)
	// The room written and the batch pods there at the previous step were
	// in force until now: judge them against the usage that followed.
	if k > 0 {
		for _, st := range r.states {
			for n := range r.tr.Nodes {
				ns := &st.nodes[n]
				ns.acc.interval(span{room: ns.room, held: ns.held, status: ns.status, pods: len(ns.batch), stale: ns.stale},
					r.usage[n], r.tr.Nodes[n].Allocatable)
			}
		}
	}
	// Batch jobs that ran their lifetime have completed.
	lifetime := int64(r.cfg.BatchLifetime / time.Second)
	for _, st := range r.states {
		for n := range st.nodes {
			ns := &st.nodes[n]
			ns.acc.completed += ns.removeBatch(func(b *policyinput.Pod) bool { return now.Unix()-b.Created >= lifetime })
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

// inOutage reports whether no usage sample reaches the publisher at now.
func (r *run) inOutage(now time.Time) bool {
	for _, o := range r.cfg.Outages {
		if !now.Before(o.From) && now.Before(o.To) {
			return true
		}
	}
	return false
}

// recordUsage sets each node's usage at step k (the sum of its pods') and
// adds the samples to the history unless metrics are out.
func (r *run) recordUsage(k int, now time.Time) {
	tr := r.tr
	out := r.inOutage(now)
	hist := r.asm.History()
	for i, p := range tr.Pods {
		if j := k - p.First; !out && p.Node >= 0 && j >= 0 && j < len(p.Kind) && p.Kind[j] != kindGap {
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
		if !out {
			r.base[n].push(u, req)
			hist.AddNode(tr.Nodes[n].Name, policy.Sample{Time: now, CPUMilli: u.CPUMilli, MemoryBytes: u.MemoryBytes})
		}
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
	out := r.inOutage(now)
	for _, st := range r.states {
		ns := &st.nodes[n]
		var res policy.Result
		threshold := policy.DefaultChangeThreshold
		ev := policy.DefaultEviction()
		switch {
		case st.c.Settings != nil:
			res = st.calc.Compute(&in, *st.c.Settings, now, r.cfg.MetricsStaleAfter)
			threshold, ev = st.c.Settings.ChangeThreshold, st.c.Settings.Eviction
		case out:
			// A baseline has no rule for stale data: the publisher's applies.
			res = policy.Result{ZeroReason: policy.ZeroReasonStale}
		default:
			res = policy.Result{Resources: st.c.Formula.Room(node.Allocatable, &r.base[n]), MetricsTime: now}
		}
		st.ev.observe(eviction.Measure(&in, res, ns.held, ev, now, r.cfg.MetricsStaleAfter, st.ev.buf), ns.batch, r.usage[n], node.Allocatable)
		d := policy.Decide(policy.Observed{Published: ns.published, Status: &ns.status, Held: ns.held}, res.Resources, now,
			policy.Gate{ChangeThreshold: threshold, DecreaseThreshold: r.cfg.DecreaseThreshold, Refresh: r.cfg.Refresh})
		if d.WriteAnnotation {
			ns.published = &policy.Published{Room: d.Room, Held: d.Held, WriteTime: now}
			ns.acc.writes++
		}
		if d.WriteStatus {
			ns.status = d.Floor
		}
		ns.room, ns.stale = d.Room, res.ZeroReason != ""
	}
}

// evictAndFill runs the contender's eviction controller, removes its
// victims, fills each node's free room with new batch pods and extends the
// timeline.
func (r *run) evictAndFill(ctx context.Context, st *contenderState, now time.Time) {
	var evicted map[types.UID]bool
	if victims := st.ev.act(ctx); len(victims) > 0 {
		evicted = make(map[types.UID]bool, len(victims))
		for _, v := range victims {
			evicted[v] = true
		}
	}
	for n := range st.nodes {
		ns := &st.nodes[n]
		if len(evicted) > 0 {
			ns.acc.evictions += ns.removeBatch(func(b *policyinput.Pod) bool { return evicted[b.UID] })
		}
		r.fill(ns, r.tr.Nodes[n].Name, now)
	}
	if tl := st.res.Timeline; tl != nil {
		ns := &st.nodes[r.timeline]
		tl.Usage = append(tl.Usage, r.usage[r.timeline])
		tl.Room = append(tl.Room, ns.room)
		tl.Held = append(tl.Held, ns.held)
		tl.Evictions = append(tl.Evictions, ns.acc.evictions-tl.total)
		tl.total = ns.acc.evictions
	}
}

// fill places batch pods on the room the node has free, as the extender
// would: pods of at most about Config.BatchPod, sharing the free room
// equally, never beyond the room.
func (r *run) fill(ns *nodeState, node string, now time.Time) {
	free := reclaimable.Resources{CPUMilli: max(ns.room.CPUMilli-ns.held.CPUMilli, 0),
		MemoryBytes: max(ns.room.MemoryBytes-ns.held.MemoryBytes, 0)}
	pods := max(free.CPUMilli/r.cfg.BatchPod.CPUMilli, free.MemoryBytes/r.cfg.BatchPod.MemoryBytes)
	for i := range pods {
		// The remainders go one unit each to the first pods.
		share := reclaimable.Resources{CPUMilli: free.CPUMilli / pods, MemoryBytes: free.MemoryBytes / pods}
		if i < free.CPUMilli%pods {
			share.CPUMilli++
		}
		if i < free.MemoryBytes%pods {
			share.MemoryBytes++
		}
		ns.seq++
		name := fmt.Sprintf("%s-%d", node, ns.seq)
		ns.batch = append(ns.batch, &policyinput.Pod{Namespace: "batch", Name: name, UID: types.UID("batch/" + name),
			NodeName: node, Reclaimed: share, Created: now.Unix(), Started: now.Unix()})
		ns.held = ns.held.Add(share)
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
	rep := &Report{Trace: summarize(tr), BatchLifetime: r.cfg.BatchLifetime.String()}
	for _, st := range r.states {
		var cluster accumulator
		for n := range st.nodes {
			acc := &st.nodes[n].acc
			acc.finish()
			st.res.Nodes[n] = NodeResult{Name: tr.Nodes[n].Name, Pods: len(tr.Nodes[n].Pods), Measures: acc.measures(tr.Step)}
			cluster.add(acc)
		}
		st.res.Cluster = cluster.measures(tr.Step)
		st.res.Spread = spread(st.res.Nodes)
		rep.Results = append(rep.Results, *st.res)
	}
	return rep
}
