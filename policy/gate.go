package policy

import (
	"math"
	"math/bits"
	"time"
)

// Reasons returned by ShouldPublish, stable strings for metrics labels.
const (
	// PublishInitial: nothing was published before.
	PublishInitial = "initial"
	// PublishDecreased: a value went down; room already promised must be
	// withdrawn at once, however small the change.
	PublishDecreased = "decreased"
	// PublishChanged: a value went up by more than the threshold.
	PublishChanged = "changed"
	// PublishRefresh: the previous write is older than the refresh interval
	// (or implausibly far in the future), so it must be rewritten before
	// readers consider it stale.
	PublishRefresh = "refresh"
)

// Published is what was last written for a node.
type Published struct {
	Values Resources
	// WriteTime is the annotation's write time.
	WriteTime time.Time
}

// ShouldPublish decides whether next must be written, given what was
// published before (nil when nothing was), at now. It returns the reason
// (one of the Publish constants), or publish false and "".
//
// In order of precedence: nothing published before (initial); any resource
// lower than before (decreased); any resource higher by a relative change
// strictly above threshold, or higher than a previous zero (changed); the
// previous write older than refresh, or more than refresh in the future
// (refresh). A threshold <= 0 republishes on any change.
func ShouldPublish(prev *Published, next Resources, now time.Time, threshold float64, refresh time.Duration) (bool, string) {
	if prev == nil {
		return true, PublishInitial
	}
	old := prev.Values
	if next.CPUMilli < old.CPUMilli || next.MemoryBytes < old.MemoryBytes {
		return true, PublishDecreased
	}
	if increasedBeyond(old.CPUMilli, next.CPUMilli, threshold) || increasedBeyond(old.MemoryBytes, next.MemoryBytes, threshold) {
		return true, PublishChanged
	}
	if age := now.Sub(prev.WriteTime); age > refresh || age < -refresh {
		return true, PublishRefresh
	}
	return false, ""
}

// increasedBeyond reports whether (next-old)/old > threshold for next >= old,
// exactly (threshold in parts per million, 128-bit products).
func increasedBeyond(old, next int64, threshold float64) bool {
	if next <= old {
		return false
	}
	if old <= 0 || !(threshold > 0) {
		return true
	}
	var ppm uint64 = math.MaxUint32
	if threshold < float64(math.MaxUint32)/1e6 {
		ppm = uint64(math.Round(threshold * 1e6))
	}
	// (next-old) x 1e6 > old x ppm
	dh, dl := bits.Mul64(uint64(next-old), 1_000_000)
	oh, ol := bits.Mul64(uint64(old), ppm)
	return dh > oh || (dh == oh && dl > ol)
}
