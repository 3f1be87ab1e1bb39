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
	podT    []int64
	podCPU  []int64
	podMem  []int64
	nodeBuf []Sample
	podBuf  []Sample
	notes   map[noteKey]string
}

// accum collects, for one node sample in the window, the pod usage aligned
// with it.
type accum struct {
	podsCPU, podsMem     int64 // every pod with an aligned sample
	reclCPU, reclMem     int64 // reclaimed pods
	regMaxCPU, regMaxMem int64 // measured regular pods: max(usage, request)
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

// usage runs the usage and max-usage-request policies on fresh samples.
func (c *Calculator) usage(n *Node, s Settings, r Result, samples []Sample, now time.Time) Result {
	newest := r.MetricsTime
	start := now.Add(-s.Window)
	if newest.Before(start) {
		// The window holds no sample (window shorter than the stale window):
		// use the newest one alone.
		start = newest
	}
	i0 := len(samples) - 1
	for i0 > 0 && !samples[i0-1].Time.Before(start) {
		i0--
	}
	win := samples[i0:]
	nw := len(win)

	acc := c.acc[:0]
	acc = slices.Grow(acc, nw)[:nw]
	clear(acc)
	c.acc = acc
	// Times as Unix nanoseconds: time.Time arithmetic dominates otherwise.
	nodeT := slices.Grow(c.nodeT[:0], nw)[:nw]
	for i := range win {
		nodeT[i] = win[i].Time.UnixNano()
	}
	c.nodeT = nodeT
	startN, newestN := start.UnixNano(), newest.UnixNano()

	tol := int64(s.alignment())
	mur := r.Policy == PolicyMaxUsageRequest
	var unmeasured reclaimable.Resources
	nUnmeasured := 0
	for pi := range n.Pods {
		p := &n.Pods[pi]
		podT, podCPU, podMem := c.podSeries(p)
		measured := false
		if !p.Reclaimed {
			measured = len(podT) > 0 && podT[len(podT)-1] >= startN &&
				!p.StartTime.IsZero() && p.StartTime.UnixNano() <= newestN
			if !measured {
				nUnmeasured++
				unmeasured.CPUMilli += p.Requests.CPUMilli
				unmeasured.MemoryBytes += p.Requests.MemoryBytes
			}
		}
		if len(podT) == 0 {
			continue
		}
		j := 0
		for i, t := range nodeT {
			for j+1 < len(podT) && podT[j+1] <= t {
				j++
			}
			// Nearest pod sample within tol; on a tie the earlier one.
			best, bestD := -1, tol
			if d := abs64(t - podT[j]); d <= bestD {
				best, bestD = j, d
			}
			if j+1 < len(podT) {
				if d := podT[j+1] - t; d <= bestD && (best < 0 || d < bestD) {
					best = j + 1
				}
			}
			a := &acc[i]
			var uc, um int64
			if best >= 0 {
				uc, um = podCPU[best], podMem[best]
				if p.Reclaimed {
					uc, um = min(uc, p.Grant.CPUMilli), min(um, p.Grant.MemoryBytes)
				}
				a.podsCPU += uc
				a.podsMem += um
			}
			switch {
			case p.Reclaimed:
				a.reclCPU += uc
				a.reclMem += um
			case measured && mur:
				a.regMaxCPU += max(uc, p.Requests.CPUMilli)
				a.regMaxMem += max(um, p.Requests.MemoryBytes)
			}
		}
	}

	peakNote := c.note(noteKey{kind: notePeak, a: int64(nw), window: s.Window, peak: s.Peak, mur: mur})
	unmeasuredNote := c.note(noteKey{kind: noteUnmeasured, a: int64(nUnmeasured)})
	terms := make([]reclaimable.Term, 0, 16)
	build := func(alloc int64, cpu bool, unmeasured int64, rs ResourceSettings) (reclaimable.ResourceExplanation, int64) {
		vals := slices.Grow(c.vals[:0], nw)[:nw]
		for i := range win {
			node, pods, recl, regMax := win[i].MemoryBytes, acc[i].podsMem, acc[i].reclMem, acc[i].regMaxMem
			if cpu {
				node, pods, recl, regMax = win[i].CPUMilli, acc[i].podsCPU, acc[i].reclCPU, acc[i].regMaxCPU
			}
			if mur {
				vals[i] = max(node-pods, 0) + regMax
			} else {
				vals[i] = max(node-recl, 0)
			}
		}
		peak := statistic(vals, s.Peak)
		for i := range win {
			node, pods := win[i].MemoryBytes, acc[i].podsMem
			if cpu {
				node, pods = win[i].CPUMilli, acc[i].podsCPU
			}
			vals[i] = max(node-pods, 0)
		}
		system := statistic(vals, s.Peak)
		c.vals = vals

		start := len(terms)
		alloc = max(alloc, 0)
		marginPPM := toPPM(rs.Margin)
		margin := mulPPMCeil(alloc, marginPPM)
		terms = append(terms,
			reclaimable.Term{Name: TermAllocatable, Op: reclaimable.OpBase, Value: alloc},
			reclaimable.Term{Name: TermMargin, Op: reclaimable.OpSubtract, Value: margin, Note: c.note(noteKey{kind: noteMargin, a: marginPPM})},
			reclaimable.Term{Name: TermRegularPeakUsage, Op: reclaimable.OpSubtract, Value: peak, Note: peakNote},
			reclaimable.Term{Name: TermSystemUsage, Op: reclaimable.OpInfo, Value: system, Note: noteSystem},
			reclaimable.Term{Name: TermUnmeasuredRequests, Op: reclaimable.OpSubtract, Value: unmeasured, Note: unmeasuredNote},
		)
		v := alloc - margin - peak - unmeasured
		v = c.clamp(&terms, v, alloc, rs)
		return reclaimable.ResourceExplanation{Terms: terms[start:len(terms):len(terms)], Result: v}, v
	}
	r.Explanation.CPU, r.CPUMilli = build(n.Allocatable.CPUMilli, true, unmeasured.CPUMilli, s.CPU)
	r.Explanation.Memory, r.MemoryBytes = build(n.Allocatable.MemoryBytes, false, unmeasured.MemoryBytes, s.Memory)
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

// podSeries returns the times (Unix nanoseconds), CPU and memory of the
// pod's samples, ascending by time: read from its Series, or from Samples
// (sorted into a scratch copy if needed).
func (c *Calculator) podSeries(p *Pod) (t, cpu, mem []int64) {
	t, cpu, mem = c.podT[:0], c.podCPU[:0], c.podMem[:0]
	if p.Series != (PodSeries{}) {
		t, cpu, mem = p.Series.appendColumns(t, cpu, mem)
	} else {
		for _, s := range sortedSamples(p.Samples, &c.podBuf) {
			t, cpu, mem = append(t, s.Time.UnixNano()), append(cpu, s.CPUMilli), append(mem, s.MemoryBytes)
		}
	}
	c.podT, c.podCPU, c.podMem = t, cpu, mem
	return t, cpu, mem
}

func abs64(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
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
