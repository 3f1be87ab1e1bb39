package eviction

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	"github.com/kube-reclaim/kube-reclaim/policy"
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
	slack    time.Duration
	m        *metrics

	// overSince is when each node was first seen over its room in the
	// current run of fresh cycles.
	overSince map[string]time.Time
	seen      map[string]bool
	due       []dueNode
	over      int

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

type dueNode struct {
	name string
	room reclaimable.Resources
}

// Config is what the controller needs from the publisher.
type Config struct {
	Options Options
	// Period is the publisher's --period.
	Period time.Duration
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
	return &Controller{opts: o, client: cfg.Client, pods: cfg.Pods, clock: clk,
		timeout: cfg.Timeout, slack: cfg.Period / 10, m: newMetrics(reg),
		overSince: map[string]time.Time{}, seen: map[string]bool{}, nodeLimits: map[string]*rate.Limiter{},
		cluster: rate.NewLimiter(perMinute(o.ClusterRate), o.ClusterBurst),
		refused: flowcontrol.NewFakeBackOff(cfg.Period, 16*cfg.Period, clk),
		dryRun:  map[types.UID]time.Time{}}
}

func perMinute(n float64) rate.Limit { return rate.Limit(n / 60) }

// SetRecorder sets where Events go; none are recorded without one.
func (c *Controller) SetRecorder(r record.EventRecorder) { c.recorder = r }

// Observe takes one node's outcome of this cycle: the policy's result (the
// room) and what its reclaimed pods hold.
func (c *Controller) Observe(node string, res policy.Result, held reclaimable.Resources) {
	c.seen[node] = true
	// Only a room computed from current measurements may evict. A zero
	// published because metrics are stale or missing says nothing about the
	// node's regular work: no data is not pressure. Such a node gets no new
	// batch pods (its room is 0) and keeps the ones it has; the over-room
	// clock starts again once data is back, so stale cycles never count
	// towards the grace.
	if !measured(res) || !Over(held, res.Resources) {
		delete(c.overSince, node)
		return
	}
	c.over++
	now := c.clock.Now()
	since, ok := c.overSince[node]
	if !ok {
		c.overSince[node], since = now, now
	}
	// Cycles start on a ticker, but this runs after the cycle's metrics
	// reads, whose duration varies: without a little slack, a grace of
	// exactly n periods would often take n+1.
	if c.opts.Mode != ModeOff && now.Sub(since)+c.slack >= c.opts.Grace {
		c.due = append(c.due, dueNode{name: node, room: res.Resources})
	}
}

// measured reports whether the room comes from current measurements only:
// no zero on purpose (stale or missing metrics), and no regular pod counted
// at its request because it has no sample yet. The latter lowers the room
// for placement, rightly, until the pod is measured (a new pod, or every pod
// right after a publisher restart, whose history starts empty), but it is a
// guess, not pressure, and must not evict.
func measured(res policy.Result) bool {
	if res.ZeroReason != "" {
		return false
	}
	for _, e := range []reclaimable.ResourceExplanation{res.Explanation.CPU, res.Explanation.Memory} {
		for _, t := range e.Terms {
			if t.Name == policy.TermUnmeasuredRequests && t.Value > 0 {
				return false
			}
		}
	}
	return true
}

// Act evicts on the nodes that have been over their room for the grace, and
// forgets nodes that were not observed in this cycle.
func (c *Controller) Act(ctx context.Context) {
	c.m.overRoom.Set(float64(c.over))
	for _, d := range c.due {
		c.actOn(ctx, d)
	}
	for n := range c.overSince {
		if !c.seen[n] {
			delete(c.overSince, n)
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
	c.due, c.over = c.due[:0], 0
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
	plan := Choose(d.room, c.candidates(d.name, now))
	log := logrus.WithFields(logrus.Fields{"node": d.name, "mode": c.opts.Mode,
		"roomCPU": plan.Room.CPUMilli, "roomMemory": plan.Room.MemoryBytes,
		"heldCPU": plan.Held.CPUMilli, "heldMemory": plan.Held.MemoryBytes, "victims": len(plan.Victims)})
	if len(plan.Victims) == 0 {
		log.Debug("over room; what is leaving already frees enough, or nothing may be evicted now")
		return
	}
	for _, v := range plan.Victims {
		if !c.allow(d.name, now) {
			c.m.rateLimited.Inc()
			log.WithField("pod", v.Key()).Info("eviction rate limit reached; the rest waits for a later cycle")
			return
		}
		if !c.evict(ctx, d.name, plan, v, log.WithFields(logrus.Fields{"pod": v.Key(), "priority": v.Priority, "created": v.Created})) {
			// Stop at the first refusal or error: the plan assumed this pod
			// gone. The next cycle plans again, without it while it backs
			// off, so a node makes at most one refused call per cycle.
			return
		}
	}
}

// evict evicts one victim (or, in dry-run, says it would), and reports
// whether the node's plan may go on.
func (c *Controller) evict(ctx context.Context, node string, plan Plan, v Candidate, log *logrus.Entry) bool {
	why := overText(plan)
	reason := overReason(plan)
	podRef := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: v.Namespace, Name: v.Name, UID: types.UID(v.UID)}
	nodeRef := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
	frees := freeText(plan, v)
	if c.opts.Mode == ModeDryRun {
		c.dryRun[types.UID(v.UID)] = c.clock.Now()
		c.m.evictions.WithLabelValues(string(ModeDryRun), reason).Inc()
		log.Info("dry-run: would evict")
		c.event(podRef, corev1.EventTypeNormal, ReasonDryRun, fmt.Sprintf("%s; would evict to free %s (--eviction=dry-run)", why, frees))
		c.event(nodeRef, corev1.EventTypeNormal, ReasonDryRun, fmt.Sprintf("%s; would evict %s to free %s (--eviction=dry-run)", why, v.Key(), frees))
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
		c.event(podRef, corev1.EventTypeWarning, ReasonEvicted, fmt.Sprintf("%s; evicted to free %s", why, frees))
		c.event(nodeRef, corev1.EventTypeWarning, ReasonEvicted, fmt.Sprintf("%s; evicted %s to free %s", why, v.Key(), frees))
		return true
	case apierrors.IsTooManyRequests(err):
		// The Eviction API answers 429 when a PodDisruptionBudget does not
		// allow the disruption now. It is never bypassed (no delete): the
		// pod backs off and is retried on a later cycle.
		c.refused.Next(v.UID, c.clock.Now())
		c.m.blocked.Inc()
		log.WithError(err).Info("eviction refused by a PodDisruptionBudget; retrying on a later cycle")
		msg := fmt.Sprintf("%s; eviction to free %s refused by a PodDisruptionBudget, retrying in %s: %s", why, frees, c.refused.Get(v.UID).Round(time.Second), apiMessage(err))
		c.event(podRef, corev1.EventTypeWarning, ReasonBlocked, msg)
		c.event(nodeRef, corev1.EventTypeWarning, ReasonBlocked, fmt.Sprintf("%s; eviction of %s to free %s refused by a PodDisruptionBudget, retrying later", why, v.Key(), frees))
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

// overText says what the node holds beyond its room, as
// "room 0m cpu, held 4000m".
func overText(p Plan) string {
	var parts []string
	if p.Held.CPUMilli > p.Room.CPUMilli {
		parts = append(parts, fmt.Sprintf("room %s cpu, held %s", cpuText(p.Room.CPUMilli), cpuText(p.Held.CPUMilli)))
	}
	if p.Held.MemoryBytes > p.Room.MemoryBytes {
		parts = append(parts, fmt.Sprintf("room %s memory, held %s", memText(p.Room.MemoryBytes), memText(p.Held.MemoryBytes)))
	}
	return strings.Join(parts, "; ")
}

func overReason(p Plan) string {
	cpu, mem := p.Held.CPUMilli > p.Room.CPUMilli, p.Held.MemoryBytes > p.Room.MemoryBytes
	switch {
	case cpu && mem:
		return "over-room-cpu-memory"
	case mem:
		return "over-room-memory"
	}
	return "over-room-cpu"
}

// freeText says what evicting v frees of the resources that are over:
// "2000m" when one is, "2000m cpu, 1Gi memory" when both are.
func freeText(p Plan, v Candidate) string {
	cpu, mem := p.Held.CPUMilli > p.Room.CPUMilli, p.Held.MemoryBytes > p.Room.MemoryBytes
	switch {
	case cpu && mem:
		return fmt.Sprintf("%s cpu, %s memory", cpuText(v.Reclaimed.CPUMilli), memText(v.Reclaimed.MemoryBytes))
	case mem:
		return memText(v.Reclaimed.MemoryBytes)
	}
	return cpuText(v.Reclaimed.CPUMilli)
}
