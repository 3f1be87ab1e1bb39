package extender

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// nodeCache is the extender's view of the cluster: per node the published
// reclaimable values and the running sums of what is already promised there.
// Every sum is updated incrementally from informer events and binds, so a
// filter or prioritize call costs one map lookup per node name, never a scan
// of the pods.
//
// Room on a node = fresh published values
//   - reclaimed requests of non-terminal pods the informer shows bound there (used)
//   - reclaimed requests of pods this process bound but the informer has not
//     shown bound yet (assumed).
//
// One RWMutex guards everything: requests read under RLock, and a bind's
// check-and-assume runs under Lock, so two binds can never both take the last
// room of a node.
type nodeCache struct {
	staleAfter    time.Duration
	assumeTimeout time.Duration
	// bindGrace bounds how long an assumption whose Binding call is still in
	// flight may live; after the call it lives assumeTimeout more.
	bindGrace time.Duration
	alive     func(time.Time) bool
	now       func() time.Time
	metrics   *metrics

	mu    sync.RWMutex
	nodes map[string]*nodeEntry
	// placed are the reclaimed pods the informer shows bound, by UID; each is
	// counted in the used sum of its node.
	placed map[types.UID]placement
	// assumed are the binds not yet confirmed by the informer, by pod UID.
	assumed map[types.UID]*assumption
}

type placement struct {
	node string
	req  reclaimable.Resources
}

// assumption is room promised to a pod by a bind the informer has not
// confirmed yet.
type assumption struct {
	uid     types.UID
	pod     string // namespace/name, for logs
	node    string
	req     reclaimable.Resources
	created time.Time
	// deadline is when the assumption expires unconfirmed.
	deadline time.Time
}

type nodeEntry struct {
	name string
	// known is true while the node informer has the node; pods may reference
	// a node the cache has not seen (or no longer has).
	known bool
	// annotation and present are the raw reclaimable annotation; they only
	// change under the write lock.
	annotation string
	present    bool
	// verdict caches reclaimable.Judge of the annotation and the interval of
	// time over which that verdict cannot change (see verdict.validAt).
	verdict atomic.Pointer[verdict]
	// allocatable is the node's native allocatable: the annotated values are
	// clamped to it (see clampTo). clamped says which resources the
	// annotation exceeds, so a clamp is counted and logged once per change.
	allocatable reclaimable.Resources
	clamped     clamp

	used     reclaimable.Resources
	assumed  reclaimable.Resources
	nPlaced  int
	nAssumed int
}

func newNodeCache(staleAfter, assumeTimeout time.Duration, alive func(time.Time) bool, m *metrics) *nodeCache {
	if alive == nil {
		alive = func(time.Time) bool { return true }
	}
	return &nodeCache{
		staleAfter:    staleAfter,
		assumeTimeout: assumeTimeout,
		bindGrace:     bindAPITimeout,
		alive:         alive,
		now:           time.Now,
		metrics:       m,
		nodes:         map[string]*nodeEntry{},
		placed:        map[types.UID]placement{},
		assumed:       map[types.UID]*assumption{},
	}
}

// verdict is a cached reclaimable.Judge result. Judge parses the annotation
// JSON, far too slow to repeat for 5000 nodes on every request, but its
// answer only depends on time through the write time's distance from now, so
// it holds over an interval computed once.
type verdict struct {
	reclaimable.Freshness
	from, until int64 // unix nanoseconds; valid for from <= now < until
	anyAlive    bool  // the verdict does not depend on the publisher lease
	alive       bool  // otherwise: the lease state it was computed with
}

func (v *verdict) validAt(now int64, alive bool) bool {
	return v.from <= now && now < v.until && (v.anyAlive || v.alive == alive)
}

// judge returns the node's freshness at now, calling reclaimable.Judge only
// when the cached verdict may have changed. Safe under the read lock: racing
// callers compute the same verdict.
func (e *nodeEntry) judge(now time.Time, nowNs int64, alive bool, staleAfter time.Duration) *verdict {
	if v := e.verdict.Load(); v != nil && v.validAt(nowNs, alive) {
		return v
	}
	fr := reclaimable.Judge(e.annotation, e.present, now, staleAfter, alive)
	fr.Values = clampTo(fr.Values, e.allocatable)
	v := &verdict{Freshness: fr, from: math.MinInt64, until: math.MaxInt64}
	switch {
	case fr.Annotation == nil:
		// Missing or malformed: no time or lease dependency.
		v.anyAlive = true
	case fr.Reason == reclaimable.ReasonWriteTooOld:
		// The annotation only gets older.
		v.from, v.anyAlive = nowNs, true
	case fr.Reason == reclaimable.ReasonFuture:
		v.until, v.anyAlive = nowNs+1, true
	default:
		// Fresh or publisher down: decided by the lease while the write time
		// is within staleAfter of now. The upper bound is exclusive, so the
		// boundary instant itself is judged again (conservative). Write
		// times beyond the int64 nanosecond range (years 1678..2262) are
		// judged on every call.
		w := fr.Annotation.WriteTime
		if lo, hi := w.Add(-staleAfter), w.Add(staleAfter); lo.Year() > 1678 && hi.Year() < 2262 {
			v.from, v.until, v.alive = lo.UnixNano(), hi.UnixNano(), alive
		} else {
			v.until = math.MinInt64
		}
	}
	e.verdict.Store(v)
	return v
}

// entry returns the entry of name, creating it. Caller holds the write lock.
func (c *nodeCache) entry(name string) *nodeEntry {
	e := c.nodes[name]
	if e == nil {
		e = &nodeEntry{name: name}
		c.nodes[name] = e
	}
	return e
}

// gc drops an entry that holds nothing. Caller holds the write lock.
func (c *nodeCache) gc(e *nodeEntry) {
	if !e.known && e.nPlaced == 0 && e.nAssumed == 0 {
		delete(c.nodes, e.name)
	}
}

// setNode records the node and its annotation (node informer add/update).
func (c *nodeCache) setNode(n *nodeRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(n.name)
	e.known = true
	if e.annotation != n.annotation || e.present != n.present || e.allocatable != n.allocatable || e.verdict.Load() == nil {
		e.annotation, e.present, e.allocatable = n.annotation, n.present, n.allocatable
		e.verdict.Store(nil)
		c.setClampLocked(e, clampOf(e.annotation, e.present, e.allocatable))
	}
}

// deleteNode forgets the node; pods still bound to it keep their sums until
// they go away, so a node that comes back is not over-booked.
func (c *nodeCache) deleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.nodes[name]; e != nil {
		e.known, e.annotation, e.present, e.allocatable = false, "", false, reclaimable.Resources{}
		e.verdict.Store(nil)
		c.setClampLocked(e, clamp{})
		c.gc(e)
	}
}

// clamp says which annotated values exceed the node's native allocatable.
type clamp struct {
	cpu, memory bool
	annotated   reclaimable.Resources // the values as written, for the log
}

// clampTo lowers v to the node's native allocatable. A larger annotated
// value comes from a bug, a hand edit or a node writing its own annotation;
// scheduling against it would promise capacity the node does not have.
func clampTo(v, allocatable reclaimable.Resources) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: min(v.CPUMilli, allocatable.CPUMilli), MemoryBytes: min(v.MemoryBytes, allocatable.MemoryBytes)}
}

// clampOf tells which annotated values exceed allocatable, whether the
// annotation is fresh or not: either way it was written wrong. A malformed
// or missing annotation publishes nothing and exceeds nothing.
func clampOf(annotation string, present bool, allocatable reclaimable.Resources) clamp {
	if !present {
		return clamp{}
	}
	a, err := reclaimable.Parse(annotation)
	if err != nil {
		return clamp{}
	}
	v := a.Values()
	return clamp{cpu: v.CPUMilli > allocatable.CPUMilli, memory: v.MemoryBytes > allocatable.MemoryBytes, annotated: v}
}

// setClampLocked records the node's clamp state, updating the gauge and
// logging only when it changes: setNode runs on every node update, the
// filter on every scheduling attempt. Caller holds the write lock.
func (c *nodeCache) setClampLocked(e *nodeEntry, now clamp) {
	was := e.clamped
	e.clamped = now
	for _, r := range []struct {
		name     string
		was, now bool
		value    int64
		limit    int64
	}{
		{clampCPU, was.cpu, now.cpu, now.annotated.CPUMilli, e.allocatable.CPUMilli},
		{clampMemory, was.memory, now.memory, now.annotated.MemoryBytes, e.allocatable.MemoryBytes},
	} {
		if r.was == r.now {
			continue
		}
		log := logrus.WithFields(logrus.Fields{"node": e.name, "resource": r.name})
		if r.now {
			c.metrics.clampedNodes.WithLabelValues(r.name).Inc()
			log.WithFields(logrus.Fields{"annotated": r.value, "allocatable": r.limit}).
				Warn("reclaimable annotation exceeds the node's native allocatable; scheduling against allocatable instead")
			continue
		}
		c.metrics.clampedNodes.WithLabelValues(r.name).Dec()
		log.Info("reclaimable annotation no longer exceeds the node's native allocatable")
	}
}

// setPod applies the informer's current view of a pod (add/update).
func (c *nodeCache) setPod(p *podRecord) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unplaceLocked(p.uid)
	if p.nodeName != "" && !p.terminal && !p.req.IsZero() {
		e := c.entry(p.nodeName)
		e.used = e.used.Add(p.req)
		e.nPlaced++
		c.placed[p.uid] = placement{node: p.nodeName, req: p.req}
	}
	// The informer showing the pod bound (anywhere) or finished ends the
	// assumption: from now on the pod counts through the informer, or not at all.
	if p.nodeName != "" || p.terminal {
		c.confirmLocked(p.uid, now)
	}
}

// deletePod applies a pod deletion.
func (c *nodeCache) deletePod(p *podRecord) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unplaceLocked(p.uid)
	c.confirmLocked(p.uid, now)
}

func (c *nodeCache) unplaceLocked(uid types.UID) {
	pl, ok := c.placed[uid]
	if !ok {
		return
	}
	delete(c.placed, uid)
	e := c.entry(pl.node)
	e.used = e.used.Add(neg(pl.req))
	e.nPlaced--
	c.gc(e)
}

func (c *nodeCache) confirmLocked(uid types.UID, now time.Time) {
	if a, ok := c.assumed[uid]; ok {
		c.dropLocked(a)
		c.metrics.assumptionConfirmed.Observe(now.Sub(a.created).Seconds())
	}
}

func (c *nodeCache) dropLocked(a *assumption) {
	delete(c.assumed, a.uid)
	e := c.entry(a.node)
	e.assumed = e.assumed.Add(neg(a.req))
	e.nAssumed--
	c.gc(e)
}

func neg(r reclaimable.Resources) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: -r.CPUMilli, MemoryBytes: -r.MemoryBytes}
}

// nodeState is one node's room at one instant.
type nodeState struct {
	known     bool
	fresh     bool
	reason    string // reclaimable reason when not fresh
	published reclaimable.Resources
	free      reclaimable.Resources
}

// states fills out[i] with the state of names[i], all under one read lock so
// the answer is one consistent snapshot.
func (c *nodeCache) states(names []string, out []nodeState) {
	now := c.now()
	nowNs := now.UnixNano()
	alive := c.alive(now)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, name := range names {
		out[i] = c.stateLocked(c.nodes[name], now, nowNs, alive)
	}
}

// statesOf is states for entries the caller looked up earlier (nil for
// names the cache did not have). An entry dropped from the cache since is
// no longer known, so it answers as an unknown node: never more room than a
// fresh lookup would find.
func (c *nodeCache) statesOf(entries []*nodeEntry, out []nodeState) {
	now := c.now()
	nowNs := now.UnixNano()
	alive := c.alive(now)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, e := range entries {
		out[i] = c.stateLocked(e, now, nowNs, alive)
	}
}

func (c *nodeCache) stateLocked(e *nodeEntry, now time.Time, nowNs int64, alive bool) nodeState {
	if e == nil || !e.known {
		return nodeState{}
	}
	v := e.judge(now, nowNs, alive, c.staleAfter)
	pub := v.Values // zero unless fresh
	return nodeState{
		known: true, fresh: v.Fresh, reason: v.Reason, published: pub,
		free: reclaimable.Resources{
			CPUMilli:    pub.CPUMilli - e.used.CPUMilli - e.assumed.CPUMilli,
			MemoryBytes: pub.MemoryBytes - e.used.MemoryBytes - e.assumed.MemoryBytes,
		},
	}
}

// errAlreadyPlaced: the informer already shows the pod bound.
var errAlreadyPlaced = errors.New("pod is already bound")

// conflict is a bind refused because the room is gone (or never was).
type conflict struct {
	reason  string // metrics label
	message string
}

func (c *conflict) Error() string { return c.message }

// assume checks that req fits on node and records the assumption, atomically.
// A previous assumption of the same pod (a retried bind) is replaced.
func (c *nodeCache) assume(uid types.UID, pod, node string, req reclaimable.Resources) (*assumption, error) {
	now := c.now()
	alive := c.alive(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if pl, ok := c.placed[uid]; ok {
		return nil, fmt.Errorf("%w: the extender's cache shows it on node %s", errAlreadyPlaced, pl.node)
	}
	if old, ok := c.assumed[uid]; ok {
		c.dropLocked(old)
	}
	st := c.stateLocked(c.nodes[node], now, now.UnixNano(), alive)
	if reason, msg := fit(st, req); reason != "" {
		return nil, &conflict{reason: reason, message: msg}
	}
	a := &assumption{uid: uid, pod: pod, node: node, req: req, created: now,
		deadline: now.Add(c.bindGrace + c.assumeTimeout)}
	c.assumed[uid] = a
	e := c.entry(node)
	e.assumed = e.assumed.Add(req)
	e.nAssumed++
	return a, nil
}

// bound records the outcome of the Binding call of a. keep is false when the
// API definitely rejected the Binding: the room is returned at once. When the
// Binding was created, or its outcome is unknown (timeout, connection lost),
// the assumption stays until the informer shows the pod or assumeTimeout.
func (c *nodeCache) bound(a *assumption, keep bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.assumed[a.uid] != a {
		return // already confirmed by the informer, or replaced
	}
	if !keep {
		c.dropLocked(a)
		return
	}
	a.deadline = now.Add(c.assumeTimeout)
}

// expire drops assumptions past their deadline and returns them.
func (c *nodeCache) expire(now time.Time) []assumption {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []assumption
	for _, a := range c.assumed {
		if now.After(a.deadline) {
			gone = append(gone, *a)
			c.dropLocked(a)
		}
	}
	return gone
}

// runExpiry expires assumptions every interval until ctx ends.
func (c *nodeCache) runExpiry(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, a := range c.expire(c.now()) {
				c.metrics.assumptionsExpired.Inc()
				logrus.WithFields(logrus.Fields{"pod": a.pod, "node": a.node, "age": c.now().Sub(a.created).Round(time.Millisecond)}).
					Warn("assumption expired before the pod informer showed the pod bound; its room is released")
			}
		}
	}
}

// counts reports the number of assumptions, tracked nodes and placed pods.
func (c *nodeCache) counts() (assumptions, nodes, placed int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.assumed), len(c.nodes), len(c.placed)
}
