package policy

import (
	"math"
	"math/bits"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Reasons of a Decision, stable strings. Those of a decision that writes are
// the reason label of the publisher's writes_total metric; the Hold reasons
// never reach a metric because nothing is written.
const (
	// PublishInitial: the node has no (readable) annotation.
	PublishInitial = "initial"
	// PublishDecreased: a value went down; room already promised must be
	// withdrawn at once.
	PublishDecreased = "decreased"
	// PublishChanged: a value went up by more than the change threshold.
	PublishChanged = "changed"
	// PublishRefresh: the previous write is older than the refresh interval
	// (or implausibly far in the future), so it must be rewritten before
	// readers consider it stale.
	PublishRefresh = "refresh"
	// PublishHeldChanged: the room stays, but what reclaimed pods hold
	// changed, so the annotation's held (and with it perhaps the status
	// floor) must follow: readers apply the floor from the annotation alone.
	PublishHeldChanged = "held-changed"
	// PublishStatusMismatch: the annotation is current but the node status
	// does not carry its values (kubelet re-registration can zero extended
	// resources), so only the status is written.
	PublishStatusMismatch = "status-mismatch"

	// HoldUnchanged: the published values are still the computed ones.
	HoldUnchanged = "unchanged"
	// HoldSmallIncrease: a value went up, but not by more than the change
	// threshold; it is published with the next write.
	HoldSmallIncrease = "small-increase"
	// HoldNoise: a value went down by less than the decrease threshold and
	// still covers what reclaimed pods hold; the refresh publishes it.
	HoldNoise = "noise"
)

// Published is what the node's annotation says was last written.
type Published struct {
	// Room is the room the annotation carries.
	Room reclaimable.Resources
	// Held is what the annotation says reclaimed pods held; zero when it
	// does not say.
	Held reclaimable.Resources
	// WriteTime is the annotation's write time.
	WriteTime time.Time
}

// Observed is the state of one node that the decision depends on.
type Observed struct {
	// Published is the node's annotation; nil when it has none or it cannot
	// be parsed.
	Published *Published
	// Status is what status.capacity and status.allocatable both carry for
	// the reclaimed resources; nil when either lacks one or they disagree,
	// which no value can match, so the status is then always rewritten.
	Status *reclaimable.Resources
	// Held is the sum of the reclaimed requests of the node's live pods:
	// room already promised, which a decrease must withdraw at once, and
	// the lower bound of the floor.
	Held reclaimable.Resources
}

// Gate holds the thresholds of the decision.
type Gate struct {
	// ChangeThreshold: an increase is published once its relative change is
	// strictly above it (Settings.ChangeThreshold); <= 0 publishes any increase.
	ChangeThreshold float64
	// DecreaseThreshold: a decrease whose relative change is strictly below
	// it is measurement noise and waits for the refresh, unless it falls
	// below Held (--decrease-threshold); 0 publishes every decrease.
	DecreaseThreshold float64
	// Refresh is the longest a write may stand (--refresh-interval).
	Refresh time.Duration
}

// Decision is what to write to one node, and why. It keeps the two numbers
// of a node apart (docs/design.md#two-numbers-per-node): the room, which the
// extender schedules against and which may drop to zero, and the floor,
// which kubelet admits against and which never drops below what
// reclaimed pods hold.
type Decision struct {
	// WriteAnnotation: write a new annotation carrying Room and Held.
	WriteAnnotation bool
	// WriteStatus: set the reclaimed resources in status.capacity and
	// status.allocatable to Floor.
	WriteStatus bool
	// Room is the room the annotation carries once the writes are done. It
	// differs from the computed room where a change was held back.
	Room reclaimable.Resources
	// Held is what the annotation says reclaimed pods hold once the writes
	// are done: Observed.Held.
	Held reclaimable.Resources
	// Floor is what the node status carries once the writes are done: per
	// resource max(Room, Held), the same rule the webhook applies.
	Floor reclaimable.Resources
	// Reason is one of the Publish or Hold constants.
	Reason string
}

// Writes reports whether the decision writes anything.
func (d Decision) Writes() bool { return d.WriteAnnotation || d.WriteStatus }

// Decide is the one place that decides whether and what the publisher writes
// for a node, given what the node carries (obs), the values the policy just
// computed, and now.
//
// The annotation is rewritten, with the reason in this order of precedence:
//   - initial: there is no previous annotation;
//   - decreased: a resource went down by at least the decrease threshold, or
//     below what reclaimed pods hold. A smaller decrease is noise: outside a
//     refresh the previous value is kept for that resource, and it is never
//     a reason to write (a refresh that carries one is a refresh);
//   - changed: a resource went up by strictly more than the change
//     threshold, or up from zero;
//   - refresh: the previous write is older than the refresh interval, or
//     more than that in the future. A refresh publishes the computed values,
//     noise included, so nothing held back outlives it;
//   - held-changed: the room stays (as published) but what reclaimed pods
//     hold is not what the annotation says, so the floor readers apply
//     would be wrong.
//
// Otherwise the annotation stays and Room is its room. The status is
// written whenever it does not carry Floor = max(Room, Held), alone with
// the reason status-mismatch when the annotation stays.
func Decide(obs Observed, computed reclaimable.Resources, now time.Time, g Gate) Decision {
	prev := obs.Published
	if prev == nil {
		return withStatus(Decision{WriteAnnotation: true, Room: computed, Reason: PublishInitial}, obs)
	}
	old := prev.Room
	age := now.Sub(prev.WriteTime)
	refreshDue := age > g.Refresh || age < -g.Refresh

	next, heldBack := computed, false
	next.CPUMilli, heldBack = keepNoise(old.CPUMilli, computed.CPUMilli, obs.Held.CPUMilli, g.DecreaseThreshold, heldBack)
	next.MemoryBytes, heldBack = keepNoise(old.MemoryBytes, computed.MemoryBytes, obs.Held.MemoryBytes, g.DecreaseThreshold, heldBack)
	// Labelled by what made the write necessary: writes_total counting every
	// refresh that carries a wobble as a decrease would hide why nodes are written.
	decreased := next.CPUMilli < old.CPUMilli || next.MemoryBytes < old.MemoryBytes
	if refreshDue {
		next = computed
	}
	d := Decision{WriteAnnotation: true, Room: next}
	switch {
	case decreased:
		d.Reason = PublishDecreased
	case increasedBeyond(old.CPUMilli, next.CPUMilli, g.ChangeThreshold) || increasedBeyond(old.MemoryBytes, next.MemoryBytes, g.ChangeThreshold):
		d.Reason = PublishChanged
	case refreshDue:
		d.Reason = PublishRefresh
	case prev.Held != obs.Held:
		// Any change of the room itself was held back: it stays as published.
		d.Room, d.Reason = old, PublishHeldChanged
	default:
		d = Decision{Room: old, Reason: HoldUnchanged}
		switch {
		case heldBack:
			d.Reason = HoldNoise
		case next != old:
			d.Reason = HoldSmallIncrease
		}
		if d = withStatus(d, obs); d.WriteStatus {
			d.Reason = PublishStatusMismatch
		}
		return d
	}
	return withStatus(d, obs)
}

// withStatus completes d with what is held and the floor, and writes the
// status when it does not carry the floor.
func withStatus(d Decision, obs Observed) Decision {
	d.Held = obs.Held
	d.Floor = d.Room.Max(obs.Held)
	d.WriteStatus = obs.Status == nil || *obs.Status != d.Floor
	return d
}

// keepNoise returns old instead of next when the decrease from old to next is
// noise: strictly below threshold relative to old, and next still covers
// held. heldBack accumulates whether any value was kept.
func keepNoise(old, next, held int64, threshold float64, heldBack bool) (int64, bool) {
	if next < old && next >= held && compareFraction(old-next, old, threshold) < 0 {
		return old, true
	}
	return next, heldBack
}

// increasedBeyond reports whether next is above old by strictly more than
// threshold relative to old; any increase from zero, or with a threshold
// <= 0, counts.
func increasedBeyond(old, next int64, threshold float64) bool {
	if next <= old {
		return false
	}
	if old <= 0 || !(threshold > 0) {
		return true
	}
	return compareFraction(next-old, old, threshold) > 0
}

// compareFraction compares delta/base with threshold (delta >= 0, base > 0)
// exactly: threshold in parts per million, 128-bit products, so that byte
// counts in the terabytes neither overflow nor round.
func compareFraction(delta, base int64, threshold float64) int {
	var ppm uint64
	switch {
	case !(threshold > 0):
		ppm = 0
	case threshold >= float64(math.MaxUint32)/1e6:
		ppm = math.MaxUint32
	default:
		ppm = uint64(math.Round(threshold * 1e6))
	}
	// delta x 1e6 against base x ppm
	dh, dl := bits.Mul64(uint64(delta), 1_000_000)
	bh, bl := bits.Mul64(uint64(base), ppm)
	switch {
	case dh > bh || (dh == bh && dl > bl):
		return 1
	case dh == bh && dl == bl:
		return 0
	}
	return -1
}
