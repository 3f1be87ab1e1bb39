package eviction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Event reasons, stable strings.
const (
	ReasonEvicted = "ReclaimedPodEvicted"
	ReasonDryRun  = "ReclaimedPodEvictionDryRun"
	ReasonBlocked = "ReclaimedPodEvictionBlocked"
)

// Controller decides and performs evictions. Observe is called for every node
// once per publish cycle and Act once at the end of it, both from the cycle
// goroutine, so its state needs no lock.
type Controller struct {
	opts     Options
	client   kubernetes.Interface
	pods     func(node string) []*policyinput.Pod
	recorder record.EventRecorder
	clock    clock.Clock
	timeout  time.Duration
	params   Params
	m        *metrics

	// nodes is what Assess remembers of each node observed.
	nodes map[string]*NodeState
	seen  map[string]bool
	due   []dueNode
	// over and pressure count this cycle's nodes over their room and in
	// memory pressure, for the gauges.
	over, pressure int

	nodeLimits map[string]*rate.Limiter
	cluster    *rate.Limiter
	// refused backs off pods whose eviction a PodDisruptionBudget refused,
	// by UID: one period, doubling up to 16.
	refused *flowcontrol.Backoff
	// dryRun remembers, by UID, when dry-run reported a pod: it then counts
	// as leaving for a grace, as an evicted pod would, so that dry-run
	// reports the victims that on would evict rather than the whole node.
	dryRun map[types.UID]time.Time
}

// dueNode is a node whose verdict calls for evictions, with its reclaimed
// pods as measured (by UID).
type dueNode struct {
	name        string
	allocatable reclaimable.Resources
	verdict     Verdict
	usage       map[types.UID]PodUsage
}

// Config is what the controller needs from the publisher.
type Config struct {
	Options Options
	// Period is the publisher's --period.
	Period time.Duration
	// MetricsStaleAfter is the publisher's --metrics-stale-after: older
	// observations never evict.
	MetricsStaleAfter time.Duration
	// Timeout bounds one Eviction API call.
	Timeout time.Duration
	Client  kubernetes.Interface
	// Pods returns the pods bound to a node, from the publisher's cache.
	Pods  func(node string) []*policyinput.Pod
	Clock clock.Clock // the real clock when nil
}

// New builds a controller; its metrics are registered on reg.
func New(cfg Config, reg prometheus.Registerer) *Controller {
	o := cfg.Options
	if o.Grace == 0 {
		o.Grace = 2 * cfg.Period
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := newMetrics(reg)
	// The reasons' series exist from the start at 0, so that a rate or an
	// increase over them (alerts, dashboards) sees the first eviction.
	if o.Mode != ModeOff {
		for _, r := range []string{PressureMemory, PressureCPUStarvation} {
			m.evictions.WithLabelValues(string(o.Mode), r)
		}
	}
	return &Controller{opts: o, client: cfg.Client, pods: cfg.Pods, clock: clk, timeout: cfg.Timeout,
		params: Params{Grace: o.Grace, Slack: cfg.Period / 10, StaleAfter: cfg.MetricsStaleAfter}, m: m,
		nodes: map[string]*NodeState{}, seen: map[string]bool{}, nodeLimits: map[string]*rate.Limiter{},
		cluster: rate.NewLimiter(perMinute(o.ClusterRate), o.ClusterBurst),
		refused: flowcontrol.NewFakeBackOff(cfg.Period, 16*cfg.Period, clk),
		dryRun:  map[types.UID]time.Time{}}
}

func perMinute(n float64) rate.Limit { return rate.Limit(n / 60) }

// SetRecorder sets where Events go; none are recorded without one.
func (c *Controller) SetRecorder(r record.EventRecorder) { c.recorder = r }

// Observe takes one node's measurements of this cycle (see Assess for what
// they decide). A room below what is held is counted, never acted on.
func (c *Controller) Observe(obs Observation) {
	c.seen[obs.Node] = true
	st := c.nodes[obs.Node]
	if st == nil {
		st = &NodeState{}
		c.nodes[obs.Node] = st
	}
	v := st.Assess(&obs, c.clock.Now(), c.params)
	if v.OverRoom {
		c.over++
	}
	if v.Memory != nil {
		c.pressure++
	}
	if c.opts.Mode == ModeOff || (v.Memory == nil && len(v.Starved) == 0) {
		return
	}
	usage := make(map[types.UID]PodUsage, len(obs.Reclaimed))
	for _, p := range obs.Reclaimed {
		usage[p.UID] = p
	}
	c.due = append(c.due, dueNode{name: obs.Node, allocatable: obs.Allocatable, verdict: v, usage: usage})
}

// Act evicts on the nodes whose verdict calls for it, and forgets nodes
// that were not observed in this cycle.
func (c *Controller) Act(ctx context.Context) {
	c.m.overRoom.Set(float64(c.over))
	c.m.memoryPressure.Set(float64(c.pressure))
	for _, d := range c.due {
		c.actOn(ctx, d)
	}
	for n := range c.nodes {
		if !c.seen[n] {
			delete(c.nodes, n)
		}
	}
	for n := range c.nodeLimits {
		if !c.seen[n] {
			delete(c.nodeLimits, n)
		}
	}
	now := c.clock.Now()
	for uid, at := range c.dryRun {
		if now.Sub(at) >= c.opts.Grace {
			delete(c.dryRun, uid)
		}
	}
	c.refused.GC()
	clear(c.seen)
	clear(c.due)
	c.due, c.over, c.pressure = c.due[:0], 0, 0
}

func (c *Controller) candidates(node string, now time.Time) []Candidate {
	pods := c.pods(node)
	out := make([]Candidate, 0, len(pods))
	for _, p := range pods {
		if p.Terminal || p.Reclaimed.IsZero() {
			continue // finished, or a regular pod: never touched
		}
		cand := Candidate{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Reclaimed: p.Reclaimed,
			Created: p.CreationTime(), Leaving: p.Deleting, Priority: p.Priority,
			Excluded: c.refused.IsInBackOffSinceUpdate(string(p.UID), now)}
		if at, ok := c.dryRun[p.UID]; ok && now.Sub(at) < c.opts.Grace {
			cand.Leaving = true
		}
		out = append(out, cand)
	}
	return out
}

func (c *Controller) nodeLimit(node string) *rate.Limiter {
	l, ok := c.nodeLimits[node]
	if !ok {
		l = rate.NewLimiter(perMinute(c.opts.NodeRate), c.opts.NodeBurst)
		c.nodeLimits[node] = l
	}
	return l
}

// allow takes a token from the node's limiter and the cluster's, or from
// neither.
func (c *Controller) allow(node string, now time.Time) bool {
	n := c.nodeLimit(node).ReserveN(now, 1)
	if !n.OK() || n.DelayFrom(now) > 0 {
		n.CancelAt(now)
		return false
	}
	cl := c.cluster.ReserveN(now, 1)
	if !cl.OK() || cl.DelayFrom(now) > 0 {
		cl.CancelAt(now)
		n.CancelAt(now)
		return false
	}
	return true
}

func (c *Controller) actOn(ctx context.Context, d dueNode) {
	now := c.clock.Now()
	cands := c.candidates(d.name, now)
	log := logrus.WithFields(logrus.Fields{"node": d.name, "mode": c.opts.Mode})
	var chosen map[string]bool
	if mv := d.verdict.Memory; mv != nil {
		plan := planMemory(mv.Free, cands, d.usage)
		mlog := log.WithFields(logrus.Fields{"pressure": PressureMemory, "used": mv.Used, "evictAbove": mv.Above,
			"evictUntilBelow": mv.Until, "victims": len(plan.Victims)})
		if len(plan.Victims) == 0 {
			mlog.Debug("memory pressure; what is leaving already frees enough, or nothing may be evicted now")
		}
		why := memoryText(*mv, d.allocatable)
		chosen = map[string]bool{}
		for _, v := range plan.Victims {
			chosen[v.UID] = true
			if !c.take(ctx, d.name, v, PressureMemory, why, "to free "+memText(v.Reclaimed.MemoryBytes), mlog) {
				return
			}
		}
	}
	byUID := make(map[string]Candidate, len(cands))
	for _, cd := range cands {
		byUID[cd.UID] = cd
	}
	for _, s := range d.verdict.Starved {
		v, ok := byUID[string(s.UID)]
		if !ok || v.Leaving || v.Excluded || chosen[v.UID] {
			continue
		}
		why := starvationText(s, d.allocatable, now)
		if !c.take(ctx, d.name, v, PressureCPUStarvation, why, "so that it can run elsewhere", log.WithField("pressure", PressureCPUStarvation)) {
			return
		}
	}
}

// take evicts one victim if the rate limits allow, and reports whether the
// node's evictions may go on this cycle.
func (c *Controller) take(ctx context.Context, node string, v Candidate, reason, why, what string, log *logrus.Entry) bool {
	log = log.WithFields(logrus.Fields{"pod": v.Key(), "priority": v.Priority, "created": v.Created})
	if !c.allow(node, c.clock.Now()) {
		c.m.rateLimited.Inc()
		log.Info("eviction rate limit reached; the rest waits for a later cycle")
		return false
	}
	// Stop at the first refusal or error: a memory plan assumed this pod
	// gone. The next cycle plans again, without it while it backs off, so
	// a node makes at most one refused call per cycle.
	return c.evict(ctx, node, v, reason, why, what, log)
}

// planMemory chooses the reclaimed pods to evict to free free bytes of
// memory, in eviction order (Choose), each counted at what it measurably
// uses: evicting a pod frees its working set, not its grant. A pod not
// measured yet counts at its memory grant, its limit: the most it can
// free, so that fewer go now and the next measured cycle evicts more if
// that was not enough.
func planMemory(free int64, cands []Candidate, usage map[types.UID]PodUsage) Plan {
	mem := make([]Candidate, len(cands))
	var used int64
	for i, cd := range cands {
		u, ok := usage[types.UID(cd.UID)]
		b := cd.Reclaimed.MemoryBytes
		if ok && u.Measured {
			b = u.Used.MemoryBytes
		}
		cd.Reclaimed = reclaimable.Resources{MemoryBytes: b}
		mem[i] = cd
		used += b
	}
	return Choose(reclaimable.Resources{MemoryBytes: used - free}, mem)
}

// evict evicts one victim (or, in dry-run, says it would), and reports
// whether the node's plan may go on. why names the pressure, what the
// purpose ("to free 2Gi").
func (c *Controller) evict(ctx context.Context, node string, v Candidate, reason, why, what string, log *logrus.Entry) bool {
	podRef := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: v.Namespace, Name: v.Name, UID: types.UID(v.UID)}
	nodeRef := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
	if c.opts.Mode == ModeDryRun {
		c.dryRun[types.UID(v.UID)] = c.clock.Now()
		c.m.evictions.WithLabelValues(string(ModeDryRun), reason).Inc()
		log.Info("dry-run: would evict")
		c.event(podRef, corev1.EventTypeNormal, ReasonDryRun, fmt.Sprintf("%s; would evict %s (--eviction=dry-run)", why, what))
		c.event(nodeRef, corev1.EventTypeNormal, ReasonDryRun, fmt.Sprintf("%s; would evict %s %s (--eviction=dry-run)", why, v.Key(), what))
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	uid := types.UID(v.UID)
	// The UID precondition: a pod recreated under the same name since the
	// cache saw it is not the one chosen.
	err := c.client.CoreV1().Pods(v.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	switch {
	case err == nil:
		c.refused.Reset(v.UID)
		c.m.evictions.WithLabelValues(string(ModeOn), reason).Inc()
		log.Info("evicted")
		c.event(podRef, corev1.EventTypeWarning, ReasonEvicted, fmt.Sprintf("%s; evicted %s", why, what))
		c.event(nodeRef, corev1.EventTypeWarning, ReasonEvicted, fmt.Sprintf("%s; evicted %s %s", why, v.Key(), what))
		return true
	case apierrors.IsTooManyRequests(err):
		// The Eviction API answers 429 when a PodDisruptionBudget does not
		// allow the disruption now. It is never bypassed (no delete): the
		// pod backs off and is retried on a later cycle.
		c.refused.Next(v.UID, c.clock.Now())
		c.m.blocked.Inc()
		log.WithError(err).Info("eviction refused by a PodDisruptionBudget; retrying on a later cycle")
		msg := fmt.Sprintf("%s; eviction %s refused by a PodDisruptionBudget, retrying in %s: %s", why, what, c.refused.Get(v.UID).Round(time.Second), apiMessage(err))
		c.event(podRef, corev1.EventTypeWarning, ReasonBlocked, msg)
		c.event(nodeRef, corev1.EventTypeWarning, ReasonBlocked, fmt.Sprintf("%s; eviction of %s %s refused by a PodDisruptionBudget, retrying later", why, v.Key(), what))
		return false
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or replaced by a pod of the same name: the next cycle sees
		// what the node holds now.
		log.WithError(err).Debug("pod gone before its eviction")
		return false
	default:
		c.m.errors.Inc()
		log.WithError(err).Warn("eviction failed; retrying on a later cycle")
		return false
	}
}

func (c *Controller) event(ref *corev1.ObjectReference, eventType, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(ref, eventType, reason, msg)
	}
}

func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Message
	}
	return err.Error()
}

func cpuText(m int64) string { return fmt.Sprintf("%dm", m) }

// memText renders bytes as a quantity; an amount that is not a whole number
// of MiB (a computed room) would print as a raw byte count, so it is rounded
// down to MiB.
func memText(b int64) string {
	if b%(1<<20) != 0 {
		b = b >> 20 << 20
	}
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// memoryText names memory pressure: "memory pressure: the node's pods use
// 60Gi of 64Gi allocatable (93.8 %); evicting above 90 % until below 85 %".
func memoryText(m MemoryVerdict, alloc reclaimable.Resources) string {
	return fmt.Sprintf("memory pressure: the node's pods use %s of %s allocatable (%s); evicting above %s until below %s",
		memText(m.Used), memText(alloc.MemoryBytes), percent(float64(m.Used)/float64(max(alloc.MemoryBytes, 1))),
		percent(m.AboveShare), percent(m.UntilShare))
}

// percent renders a share as "93.8 %", "90 %".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + " %"
}

// starvationText names CPU starvation: "cpu starvation: used 120m of its
// 4000m cpu grant for 30m0s while the node's pods used 15800m of 16000m
// allocatable".
func starvationText(s Starved, alloc reclaimable.Resources, now time.Time) string {
	return fmt.Sprintf("cpu starvation: used %s of its %s cpu grant for %s while the node's pods used %s of %s allocatable",
		cpuText(s.Used), cpuText(s.Grant), now.Sub(s.Since).Round(time.Second), cpuText(s.NodeUsed), cpuText(alloc.CPUMilli))
}
