package policy

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Calculator computes policies with reusable scratch buffers, so that a full
// cycle over thousands of nodes allocates almost nothing beyond the
// explanations it returns. A Calculator is not safe for concurrent use; use
// one per goroutine. The zero value is ready to use.
type Calculator struct {
	acc     []accum
	vals    []int64
	nodeT   []int64
	pod     columns
	nodeBuf []Sample
	podBuf  []Sample
	notes   map[noteKey]string
}

var calculators = sync.Pool{New: func() any { return new(Calculator) }}

// Compute runs the node's policy with a pooled Calculator. See
// Calculator.Compute.
func Compute(n *Node, s Settings, now time.Time, metricsStaleAfter time.Duration) Result {
	c := calculators.Get().(*Calculator)
	r := c.Compute(n, s, now, metricsStaleAfter)
	calculators.Put(c)
	return r
}

// MetricsStaleAfter is the stale bound Compute applies for d:
// reclaimable.DefaultMetricsStaleAfter when d is not positive.
func MetricsStaleAfter(d time.Duration) time.Duration {
	if d <= 0 {
		return reclaimable.DefaultMetricsStaleAfter
	}
	return d
}

// Compute returns the reclaimable CPU and memory of node n under settings s.
//
// now is the evaluation instant (the caller's clock; Compute never reads the
// clock itself) and metricsStaleAfter the stale window
// (reclaimable.DefaultMetricsStaleAfter when not positive). The usage
// policies publish zero with a ZeroReason when the node has no usage sample
// or its newest sample is older than metricsStaleAfter; the request policy
// does not read usage and ignores both.
//
// Samples must be ascending by Time; unsorted series are sorted into a scratch
// copy (n is never modified).
func (c *Calculator) Compute(n *Node, s Settings, now time.Time, metricsStaleAfter time.Duration) Result {
	policy := s.Policy
	if policy == "" {
		policy = PolicyUsage
	}
	r := Result{Policy: policy}
	samples := sortedSamples(n.Samples, &c.nodeBuf)
	if len(samples) > 0 {
		r.MetricsTime = samples[len(samples)-1].Time
	}
	switch {
	case !policy.Valid():
		return zeroResult(r, ZeroReasonInvalidSettings, fmt.Sprintf("unknown policy %q", string(policy)))
	case policy == PolicyRequest:
		return c.request(n, s, r)
	case len(samples) == 0:
		return zeroResult(r, ZeroReasonNoSamples, "the node has no usage sample")
	}
	metricsStaleAfter = MetricsStaleAfter(metricsStaleAfter)
	newest := r.MetricsTime
	if age := now.Sub(newest); age > metricsStaleAfter {
		return zeroResult(r, ZeroReasonStale,
			fmt.Sprintf("newest node sample is %s old (stale after %s)", age.Round(time.Second), metricsStaleAfter))
	}
	return c.usage(n, s, r, samples, now)
}

func zeroResult(r Result, reason, note string) Result {
	r.ZeroReason = reason
	terms := []reclaimable.Term{
		{Name: reason, Op: reclaimable.OpBase, Value: 0, Note: note},
		{Name: reason, Op: reclaimable.OpBase, Value: 0, Note: note},
	}
	r.Explanation = reclaimable.Explanation{
		CPU:    reclaimable.ResourceExplanation{Terms: terms[0:1:1]},
		Memory: reclaimable.ResourceExplanation{Terms: terms[1:2:2]},
	}
	return r
}

func (c *Calculator) request(n *Node, s Settings, r Result) Result {
	var req reclaimable.Resources
	regular := 0
	for i := range n.Pods {
		p := &n.Pods[i]
		if p.Reclaimed {
			continue
		}
		regular++
		req.CPUMilli += p.Requests.CPUMilli
		req.MemoryBytes += p.Requests.MemoryBytes
	}
	reqNote := c.note(noteKey{kind: noteRegularRequests, a: int64(regular)})
	terms := make([]reclaimable.Term, 0, 10)
	build := func(alloc, requested int64, rs ResourceSettings) (reclaimable.ResourceExplanation, int64) {
		start := len(terms)
		alloc = max(alloc, 0)
		terms = append(terms,
			reclaimable.Term{Name: TermAllocatable, Op: reclaimable.OpBase, Value: alloc},
			reclaimable.Term{Name: TermRegularRequests, Op: reclaimable.OpSubtract, Value: requested, Note: reqNote})
		v := alloc - requested
		v = c.clamp(&terms, v, alloc, rs)
		return reclaimable.ResourceExplanation{Terms: terms[start:len(terms):len(terms)], Result: v}, v
	}
	r.Explanation.CPU, r.CPUMilli = build(n.Allocatable.CPUMilli, req.CPUMilli, s.CPU)
	r.Explanation.Memory, r.MemoryBytes = build(n.Allocatable.MemoryBytes, req.MemoryBytes, s.Memory)
	return r
}

// clamp appends the floor, cap and minimum terms and applies them to v.
func (c *Calculator) clamp(terms *[]reclaimable.Term, v, alloc int64, rs ResourceSettings) int64 {
	capPPM := toPPM(rs.MaxRatio)
	limit := mulPPMFloor(alloc, capPPM)
	minimum := max(rs.Minimum, 0)
	*terms = append(*terms,
		reclaimable.Term{Name: TermFloor, Op: reclaimable.OpFloor, Value: 0},
		reclaimable.Term{Name: TermCap, Op: reclaimable.OpCap, Value: limit, Note: c.note(noteKey{kind: noteCap, a: capPPM})},
		reclaimable.Term{Name: TermMinimum, Op: reclaimable.OpMinimum, Value: minimum},
	)
	v = min(max(v, 0), limit)
	if v < minimum {
		v = 0
	}
	return v
}

// statistic returns the maximum or the nearest-rank percentile of vals
// (reordering vals). vals must not be empty.
func statistic(vals []int64, p Peak) int64 {
	if p.IsMax() {
		return slices.Max(vals)
	}
	slices.Sort(vals)
	// Nearest rank: the smallest value with at least p% of the samples at
	// or below it, rank = ceil(p/100 x n).
	n := uint64(len(vals))
	rank := (n*uint64(p) + 99999) / 100000
	if rank < 1 {
		rank = 1
	}
	return vals[rank-1]
}

// sortedSamples returns s if it is ascending by Time, otherwise a sorted copy
// in *buf.
func sortedSamples(s []Sample, buf *[]Sample) []Sample {
	for i := 1; i < len(s); i++ {
		if s[i].Time.Before(s[i-1].Time) {
			*buf = append((*buf)[:0], s...)
			slices.SortStableFunc(*buf, func(a, b Sample) int { return a.Time.Compare(b.Time) })
			return *buf
		}
	}
	return s
}

// toPPM converts a ratio in [0,1] to parts per million, clamped.
func toPPM(f float64) int64 {
	if !(f > 0) { // also NaN
		return 0
	}
	if f >= 1 {
		return 1_000_000
	}
	return int64(math.Round(f * 1e6))
}

// mulPPMFloor returns floor(a x ppm / 1e6) for a >= 0 and 0 <= ppm <= 1e6.
func mulPPMFloor(a, ppm int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(ppm))
	q, _ := bits.Div64(hi, lo, 1_000_000)
	return int64(q)
}

// mulPPMCeil returns ceil(a x ppm / 1e6) for a >= 0 and 0 <= ppm <= 1e6.
func mulPPMCeil(a, ppm int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(ppm))
	q, rem := bits.Div64(hi, lo, 1_000_000)
	if rem != 0 {
		q++
	}
	return int64(q)
}

// Notes are cached per Calculator: they depend on settings and counts that
// repeat across nodes, so a cycle formats each one once.
type noteKind uint8

const (
	noteMargin noteKind = iota + 1
	noteCap
	notePeak
	noteUnmeasured
	noteRegularRequests
)

const noteSystem = "node usage beyond its pods, same statistic; included in regular-peak-usage"

type noteKey struct {
	kind   noteKind
	mur    bool
	peak   Peak
	a      int64
	window time.Duration
}

func (c *Calculator) note(k noteKey) string {
	if s, ok := c.notes[k]; ok {
		return s
	}
	var s string
	switch k.kind {
	case noteMargin:
		s = formatPPM(k.a) + " of allocatable kept unreclaimed"
	case noteCap:
		s = formatPPM(k.a) + " of allocatable at most"
	case notePeak:
		what := "node usage minus reclaimed pods' usage (each at most its grant)"
		if k.mur {
			what = "system usage plus each measured regular pod's max(usage, request)"
		}
		s = fmt.Sprintf("%s over %s of %d samples: %s", k.peak, k.window, k.a, what)
	case noteUnmeasured:
		s = "requests of " + strconv.FormatInt(k.a, 10) + " regular pods without usage samples"
	case noteRegularRequests:
		s = "requests of " + strconv.FormatInt(k.a, 10) + " regular pods"
	}
	if c.notes == nil || len(c.notes) > 4096 {
		c.notes = make(map[noteKey]string)
	}
	c.notes[k] = s
	return s
}

func formatPPM(ppm int64) string {
	return strconv.FormatFloat(float64(ppm)/1e4, 'f', -1, 64) + "%"
}
