// Package placement is the one placement core of kube-reclaim's two
// scheduler integrations, the HTTP extender and the kube-reclaim-scheduler
// plugin: per node the room the publisher published, what is held there and
// what is assumed, whether a pod fits, how a node scores and the messages a
// Pending pod shows. Both feed the same Cache from their informers, so the
// two topologies cannot disagree on where a reclaimed pod fits.
package placement

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Cache is a scheduler's view of reclaimed room: per node the published
// reclaimable values and the running sums of what is already promised there.
// Every sum is updated incrementally from informer events and binds, so a
// filter or prioritize call costs one map lookup per node name, never a scan
// of the pods.
//
// Room on a node = fresh published values
//   - reclaimed requests of non-terminal pods the informer shows bound there (used)
//   - reclaimed requests of pods this process placed (bound, or reserved in
//     the scheduling framework) but the informer has not shown bound yet
//     (assumed).
//
// One RWMutex guards everything: requests read under RLock, and an
// assume's check-and-record runs under Lock, so two placements can never
// both take the last room of a node.
type Cache struct {
	staleAfter    time.Duration
	assumeTimeout time.Duration
	// bindGrace bounds how long an assumption whose Binding call is still in
	// flight may live; after the call it lives assumeTimeout more.
	bindGrace time.Duration
	alive     func(time.Time) bool
	now       func() time.Time
	metrics   *Metrics

	mu    sync.RWMutex
	nodes map[string]*Entry
	// placed are the reclaimed pods the informer shows bound, by UID; each is
	// counted in the used sum of its node.
	placed map[types.UID]placed
	// assumed are the placements not yet confirmed by the informer, by pod UID.
	assumed map[types.UID]*Assumption
}

type placed struct {
	node string
	req  reclaimable.Resources
}

// Assumption is room promised to a pod by a placement the informer has not
// confirmed yet.
type Assumption struct {
	uid types.UID
	// Pod is namespace/name, for logs.
	Pod     string
	Node    string
	req     reclaimable.Resources
	Created time.Time
	// deadline is when the assumption expires unconfirmed.
	deadline time.Time
}

// Entry is one node of the cache; callers that look names up under RLock
// (EntryLocked) hand entries back to StatesOf.
type Entry struct {
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

// Metrics are what the cache counts; the caller registers them under its
// own names.
type Metrics struct {
	// ClampedNodes is by resource (ClampCPU, ClampMemory).
	ClampedNodes        *prometheus.GaugeVec
	AssumptionsExpired  prometheus.Counter
	AssumptionConfirmed prometheus.Observer
}

// Resource label values of ClampedNodes.
const (
	ClampCPU    = "cpu"
	ClampMemory = "memory"
)

// NewCache returns an empty cache. Node annotations older than staleAfter
// are stale; an assumption lives bindGrace (the placement's own API call)
// plus assumeTimeout unless the informer confirms it; alive tells whether
// the publisher's lease is held (nil: always).
func NewCache(staleAfter, assumeTimeout, bindGrace time.Duration, alive func(time.Time) bool, m *Metrics) *Cache {
	if alive == nil {
		alive = func(time.Time) bool { return true }
	}
	return &Cache{
		staleAfter:    staleAfter,
		assumeTimeout: assumeTimeout,
		bindGrace:     bindGrace,
		alive:         alive,
		now:           time.Now,
		metrics:       m,
		nodes:         map[string]*Entry{},
		placed:        map[types.UID]placed{},
		assumed:       map[types.UID]*Assumption{},
	}
}

// SetClock replaces the clock and the publisher liveness (tests).
func (c *Cache) SetClock(now func() time.Time, alive func(time.Time) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.alive = now, alive
}

// Now is the cache's clock.
func (c *Cache) Now() time.Time { return c.now() }

// AssumeTimeout is how long a confirmed placement's assumption waits for
// the informer.
func (c *Cache) AssumeTimeout() time.Duration { return c.assumeTimeout }

// RLock takes the read lock for a run of EntryLocked lookups.
func (c *Cache) RLock() { c.mu.RLock() }

// RUnlock releases RLock.
func (c *Cache) RUnlock() { c.mu.RUnlock() }

// EntryLocked returns the entry of the node named b, nil when the cache
// has none. The caller holds RLock; b is not kept.
func (c *Cache) EntryLocked(b []byte) *Entry {
	return c.nodes[string(b)] // no allocation: the compiler looks up b in place
}

// LenLocked is the number of entries; the caller holds RLock.
func (c *Cache) LenLocked() int { return len(c.nodes) }

// Name is the node's name, the cache's own string.
func (e *Entry) Name() string { return e.name }

// Clamped reports whether the node's annotated CPU and memory exceed its
// native allocatable.
func (e *Entry) Clamped() (cpu, memory bool) { return e.clamped.cpu, e.clamped.memory }

// Node is what the cache keeps of a node.
type Node struct {
	Name string
	// Annotation is the node's reclaimable annotation, Present whether it
	// has one.
	Annotation string
	Present    bool
	// Allocatable is the node's native CPU and memory: no annotated value
	// may exceed it (NativeAllocatable).
	Allocatable reclaimable.Resources
}

// Pod is what the cache keeps of a pod.
type Pod struct {
	UID types.UID
	// NodeName is spec.nodeName, empty while the pod is not bound.
	NodeName string
	// Req is the pod's reclaimed request.
	Req      reclaimable.Resources
	Terminal bool
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
func (e *Entry) judge(now time.Time, nowNs int64, alive bool, staleAfter time.Duration) *verdict {
	if v := e.verdict.Load(); v != nil && v.validAt(nowNs, alive) {
		return v
	}
	fr := reclaimable.Judge(e.annotation, e.present, now, staleAfter, alive)
	fr.Room = clampTo(fr.Room, e.allocatable)
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
func (c *Cache) entry(name string) *Entry {
	e := c.nodes[name]
	if e == nil {
		e = &Entry{name: name}
		c.nodes[name] = e
	}
	return e
}

// gc drops an entry that holds nothing. Caller holds the write lock.
func (c *Cache) gc(e *Entry) {
	if !e.known && e.nPlaced == 0 && e.nAssumed == 0 {
		delete(c.nodes, e.name)
	}
}

// SetNode records the node and its annotation (node informer add/update).
func (c *Cache) SetNode(n Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(n.Name)
	e.known = true
	if e.annotation != n.Annotation || e.present != n.Present || e.allocatable != n.Allocatable || e.verdict.Load() == nil {
		e.annotation, e.present, e.allocatable = n.Annotation, n.Present, n.Allocatable
		e.verdict.Store(nil)
		c.setClampLocked(e, clampOf(e.annotation, e.present, e.allocatable))
	}
}

// DeleteNode forgets the node; pods still bound to it keep their sums until
// they go away, so a node that comes back is not over-booked.
func (c *Cache) DeleteNode(name string) {
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
	v := a.Room()
	return clamp{cpu: v.CPUMilli > allocatable.CPUMilli, memory: v.MemoryBytes > allocatable.MemoryBytes, annotated: v}
}

// setClampLocked records the node's clamp state, updating the gauge and
// logging only when it changes: setNode runs on every node update, the
// filter on every scheduling attempt. Caller holds the write lock.
func (c *Cache) setClampLocked(e *Entry, now clamp) {
	was := e.clamped
	e.clamped = now
	for _, r := range []struct {
		name     string
		was, now bool
		value    int64
		limit    int64
	}{
		{ClampCPU, was.cpu, now.cpu, now.annotated.CPUMilli, e.allocatable.CPUMilli},
		{ClampMemory, was.memory, now.memory, now.annotated.MemoryBytes, e.allocatable.MemoryBytes},
	} {
		if r.was == r.now {
			continue
		}
		log := logrus.WithFields(logrus.Fields{"node": e.name, "resource": r.name})
		if r.now {
			c.metrics.ClampedNodes.WithLabelValues(r.name).Inc()
			log.WithFields(logrus.Fields{"annotated": r.value, "allocatable": r.limit}).
				Warn("reclaimable annotation exceeds the node's native allocatable; scheduling against allocatable instead")
			continue
		}
		c.metrics.ClampedNodes.WithLabelValues(r.name).Dec()
		log.Info("reclaimable annotation no longer exceeds the node's native allocatable")
	}
}

// SetPod applies the informer's current view of a pod (add/update).
func (c *Cache) SetPod(p Pod) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unplaceLocked(p.UID)
	if p.NodeName != "" && !p.Terminal && !p.Req.IsZero() {
		e := c.entry(p.NodeName)
		e.used = e.used.Add(p.Req)
		e.nPlaced++
		c.placed[p.UID] = placed{node: p.NodeName, req: p.Req}
	}
	// The informer showing the pod bound (anywhere) or finished ends the
	// assumption: from now on the pod counts through the informer, or not at all.
	if p.NodeName != "" || p.Terminal {
		c.confirmLocked(p.UID, now)
	}
}

// DeletePod applies a pod deletion.
func (c *Cache) DeletePod(uid types.UID) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unplaceLocked(uid)
	c.confirmLocked(uid, now)
}

func (c *Cache) unplaceLocked(uid types.UID) {
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

func (c *Cache) confirmLocked(uid types.UID, now time.Time) {
	if a, ok := c.assumed[uid]; ok {
		c.dropLocked(a)
		c.metrics.AssumptionConfirmed.Observe(now.Sub(a.Created).Seconds())
	}
}

func (c *Cache) dropLocked(a *Assumption) {
	delete(c.assumed, a.uid)
	e := c.entry(a.Node)
	e.assumed = e.assumed.Add(neg(a.req))
	e.nAssumed--
	c.gc(e)
}

func neg(r reclaimable.Resources) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: -r.CPUMilli, MemoryBytes: -r.MemoryBytes}
}

// State is one node's room at one instant.
type State struct {
	Known bool
	Fresh bool
	// Reason is the reclaimable reason when not fresh.
	Reason    string
	Published reclaimable.Resources
	Free      reclaimable.Resources
}

// States fills out[i] with the state of names[i], all under one read lock so
// the answer is one consistent snapshot.
func (c *Cache) States(names []string, out []State) {
	now := c.now()
	nowNs := now.UnixNano()
	alive := c.alive(now)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, name := range names {
		out[i] = c.stateLocked(c.nodes[name], now, nowNs, alive)
	}
}

// StatesOf is States for entries the caller looked up earlier (nil for
// names the cache did not have). An entry dropped from the cache since is
// no longer known, so it answers as an unknown node: never more room than a
// fresh lookup would find.
func (c *Cache) StatesOf(entries []*Entry, out []State) {
	now := c.now()
	nowNs := now.UnixNano()
	alive := c.alive(now)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, e := range entries {
		out[i] = c.stateLocked(e, now, nowNs, alive)
	}
}

func (c *Cache) stateLocked(e *Entry, now time.Time, nowNs int64, alive bool) State {
	if e == nil || !e.known {
		return State{}
	}
	v := e.judge(now, nowNs, alive, c.staleAfter)
	pub := v.Room // zero unless fresh
	return State{
		Known: true, Fresh: v.Fresh, Reason: v.Reason, Published: pub,
		Free: reclaimable.Resources{
			CPUMilli:    pub.CPUMilli - e.used.CPUMilli - e.assumed.CPUMilli,
			MemoryBytes: pub.MemoryBytes - e.used.MemoryBytes - e.assumed.MemoryBytes,
		},
	}
}

// ErrAlreadyPlaced: the informer already shows the pod bound.
var ErrAlreadyPlaced = errors.New("pod is already bound")

// Conflict is a placement refused because the room is gone (or never was).
type Conflict struct {
	// Reason is the metrics label (see Fit).
	Reason  string
	Message string
}

func (c *Conflict) Error() string { return c.Message }

// Assume checks that req fits on node and records the assumption, atomically.
// A previous assumption of the same pod (a retried placement) is replaced.
func (c *Cache) Assume(uid types.UID, pod, node string, req reclaimable.Resources) (*Assumption, error) {
	now := c.now()
	alive := c.alive(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if pl, ok := c.placed[uid]; ok {
		return nil, fmt.Errorf("%w: the placement cache shows it on node %s", ErrAlreadyPlaced, pl.node)
	}
	if old, ok := c.assumed[uid]; ok {
		c.dropLocked(old)
	}
	st := c.stateLocked(c.nodes[node], now, now.UnixNano(), alive)
	if reason, msg := Fit(st, req); reason != "" {
		return nil, &Conflict{Reason: reason, Message: msg}
	}
	a := &Assumption{uid: uid, Pod: pod, Node: node, req: req, Created: now,
		deadline: now.Add(c.bindGrace + c.assumeTimeout)}
	c.assumed[uid] = a
	e := c.entry(node)
	e.assumed = e.assumed.Add(req)
	e.nAssumed++
	return a, nil
}

// Bound records the outcome of the Binding call of a. keep is false when the
// API definitely rejected the Binding: the room is returned at once. When the
// Binding was created, or its outcome is unknown (timeout, connection lost),
// the assumption stays until the informer shows the pod or assumeTimeout.
func (c *Cache) Bound(a *Assumption, keep bool) {
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

// Forget drops the assumption of the pod uid, if any: the placement was
// undone before its Binding (the framework's Unreserve).
func (c *Cache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.assumed[uid]; ok {
		c.dropLocked(a)
	}
}

// Expire drops assumptions past their deadline and returns them.
func (c *Cache) Expire(now time.Time) []Assumption {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []Assumption
	for _, a := range c.assumed {
		if now.After(a.deadline) {
			gone = append(gone, *a)
			c.dropLocked(a)
		}
	}
	return gone
}

// RunExpiry expires assumptions every interval until ctx ends.
func (c *Cache) RunExpiry(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, a := range c.Expire(c.now()) {
				c.metrics.AssumptionsExpired.Inc()
				logrus.WithFields(logrus.Fields{"pod": a.Pod, "node": a.Node, "age": c.now().Sub(a.Created).Round(time.Millisecond)}).
					Warn("assumption expired before the pod informer showed the pod bound; its room is released")
			}
		}
	}
}

// Counts reports the number of assumptions, tracked nodes and placed pods.
func (c *Cache) Counts() (assumptions, nodes, placed int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.assumed), len(c.nodes), len(c.placed)
}

// Held returns the reclaimed requests held on node by the pods the
// informer shows bound there, and those assumed there.
func (c *Cache) Held(node string) (used, assumed reclaimable.Resources) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e := c.nodes[node]; e != nil {
		return e.used, e.assumed
	}
	return reclaimable.Resources{}, reclaimable.Resources{}
}

// Names returns the names of the nodes the cache holds an entry of.
func (c *Cache) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.nodes))
	for n := range c.nodes {
		names = append(names, n)
	}
	return names
}

// Hold stops every reader and writer of the cache until release is called:
// tests of what callers do while the cache is busy.
func (c *Cache) Hold() (release func()) {
	c.mu.Lock()
	return c.mu.Unlock
}

// Annotation is the node's reclaimable annotation as last set.
func (e *Entry) Annotation() string { return e.annotation }

// State returns the state of the node name at this instant.
func (c *Cache) State(name string) State {
	now := c.now()
	alive := c.alive(now)
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stateLocked(c.nodes[name], now, now.UnixNano(), alive)
}
