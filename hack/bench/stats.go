package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value with at least p % of the values at or below it.
// It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencySummary is what the tables show of a set of latencies.
type latencySummary struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize sorts a copy of d and returns its percentiles.
func summarize(d []time.Duration) latencySummary {
	s := slices.Clone(d)
	slices.Sort(s)
	out := latencySummary{N: len(s), P50: percentile(s, 50), P99: percentile(s, 99)}
	if len(s) > 0 {
		out.Max = s[len(s)-1]
	}
	return out
}

// ms formats a duration in milliseconds with a precision that suits
// sub-millisecond and multi-second values alike.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
