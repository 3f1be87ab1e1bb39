package eviction

// This file is the pure part of the controller: no client-go, no clock, so
// that the choice of victims can be tested on its own.

import (
	"cmp"
	"slices"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Candidate is one pod bound to the node that requests reclaimed resources.
type Candidate struct {
	Namespace string
	Name      string
	UID       string
	// Reclaimed is what the pod requests of the reclaimed resources.
	Reclaimed reclaimable.Resources
	Priority  int32
	Created   time.Time
	// Leaving: the pod is already being deleted (an earlier eviction, or
	// anyone else). Its requests still count in what the node holds, but it
	// frees them on its own, so it is never chosen and what it frees is
	// counted before anything else is chosen.
	Leaving bool
	// Excluded: the pod may not be chosen this time (its last eviction was
	// refused by a PodDisruptionBudget and is backing off); it stays held.
	Excluded bool
}

// Key names the pod for logs and back-off bookkeeping.
func (c Candidate) Key() string { return c.Namespace + "/" + c.Name }

// Plan is the choice for one node.
type Plan struct {
	Room reclaimable.Resources
	// Held is what every candidate requests, leaving ones included.
	Held reclaimable.Resources
	// Victims, in the order they should be evicted (lowest priority, then
	// youngest first).
	Victims []Candidate
	// After is what stays held once the leaving pods and the victims are
	// gone. It exceeds Room only when the pods that may be chosen cannot
	// free enough (the others are excluded).
	After reclaimable.Resources
}

// Over reports whether held exceeds room on any resource.
func Over(held, room reclaimable.Resources) bool {
	return held.CPUMilli > room.CPUMilli || held.MemoryBytes > room.MemoryBytes
}

func sub(a, b reclaimable.Resources) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: a.CPUMilli - b.CPUMilli, MemoryBytes: a.MemoryBytes - b.MemoryBytes}
}

// evictionOrder puts the pod to give up first first: lowest priority, then
// the youngest (it has lost the least work), then by name so that the
// choice does not depend on the order pods came from the cache.
func evictionOrder(a, b Candidate) int {
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	if c := b.Created.Compare(a.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Key(), b.Key())
}

// Choose picks the pods to evict so that what the node holds fits its room
// on every resource.
//
// Pods are taken in eviction order until what stays held fits; then, like
// kube-scheduler's preemption, every victim is offered a reprieve, the most
// important first, and is spared when the others free enough without it. So
// no victim could be spared and no pod goes while a lower one that frees as
// much stays: the set is minimal in eviction order. (The smallest set
// regardless of order is a knapsack problem, and would evict a
// high-priority pod to spare two low ones.)
func Choose(room reclaimable.Resources, pods []Candidate) Plan {
	plan := Plan{Room: room}
	var order []Candidate
	for _, p := range pods {
		plan.Held = plan.Held.Add(p.Reclaimed)
		switch {
		case p.Leaving:
			plan.After = sub(plan.After, p.Reclaimed)
		case !p.Excluded && !p.Reclaimed.IsZero():
			order = append(order, p)
		}
	}
	plan.After = plan.After.Add(plan.Held)
	if !Over(plan.After, room) {
		return plan
	}
	slices.SortFunc(order, evictionOrder)
	after := plan.After
	var victims []Candidate
	for _, p := range order {
		if !Over(after, room) {
			break
		}
		// A pod that frees nothing of what is over cannot help.
		if !frees(p.Reclaimed, after, room) {
			continue
		}
		victims = append(victims, p)
		after = sub(after, p.Reclaimed)
	}
	// Reprieve, most important victim first.
	for i := len(victims) - 1; i >= 0; i-- {
		if spared := after.Add(victims[i].Reclaimed); !Over(spared, room) {
			after = spared
			victims = slices.Delete(victims, i, i+1)
		}
	}
	plan.Victims, plan.After = victims, after
	return plan
}

// frees reports whether evicting a pod requesting r lowers a resource that is
// over its room.
func frees(r, held, room reclaimable.Resources) bool {
	return (held.CPUMilli > room.CPUMilli && r.CPUMilli > 0) ||
		(held.MemoryBytes > room.MemoryBytes && r.MemoryBytes > 0)
}
