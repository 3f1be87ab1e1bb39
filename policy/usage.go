package policy

import (
	"slices"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// resource indexes the two resources of the formula. Every per-resource
// value of the usage policies is held indexed by it, so that one function
// builds the terms of either resource.
type resource int

const (
	cpu resource = iota
	memory
	numResources
)

// amounts is one value per resource.
type amounts [numResources]int64

// add adds CPU and memory in place: the alignment's inner loop, where
// whole-array arithmetic would go through memory.
func (a *amounts) add(cpuAmount, memoryAmount int64) {
	a[cpu] += cpuAmount
	a[memory] += memoryAmount
}

// columns holds samples by column: times as Unix nanoseconds (time.Time
// arithmetic dominates otherwise) and the usage of each resource.
type columns struct {
	t   []int64
	use [numResources][]int64
}

// usage is the sample's usage indexed by resource.
func (s *Sample) usage() amounts { return amounts{s.CPUMilli, s.MemoryBytes} }

// accum collects, for one node sample in the window, the usage of the pods
// aligned with it.
type accum struct {
	pods   amounts // every pod with an aligned sample
	recl   amounts // reclaimed pods
	regMax amounts // measured regular pods: max(usage, request)
}

// usageFormula is what the terms of both resources share.
type usageFormula struct {
	// win is the node samples in the window.
	win  []Sample
	peak Peak
	// mur is the max-usage-request policy.
	mur bool
	// unmeasured sums the requests of the regular pods the window does not
	// measure.
	unmeasured               amounts
	peakNote, unmeasuredNote string
}

// usage runs the usage and max-usage-request policies on fresh samples, in
// three steps: the window of node samples, the usage of the pods aligned
// with each of them, then the terms of each resource.
func (c *Calculator) usage(n *Node, s Settings, r Result, samples []Sample, now time.Time) Result {
	win, startN, newestN := c.selectWindow(samples, now.Add(-s.Window), r.MetricsTime)
	f := usageFormula{win: win, peak: s.Peak, mur: r.Policy == PolicyMaxUsageRequest}
	var nUnmeasured int
	f.unmeasured, nUnmeasured = c.alignPods(n.Pods, startN, newestN, int64(s.alignment()), f.mur)
	f.peakNote = c.note(noteKey{kind: notePeak, a: int64(len(win)), window: s.Window, peak: s.Peak, mur: f.mur})
	f.unmeasuredNote = c.note(noteKey{kind: noteUnmeasured, a: int64(nUnmeasured)})

	terms := make([]reclaimable.Term, 0, 16)
	r.Explanation.CPU, r.CPUMilli = c.resourceTerms(&terms, &f, cpu, n.Allocatable.CPUMilli, s.CPU)
	r.Explanation.Memory, r.MemoryBytes = c.resourceTerms(&terms, &f, memory, n.Allocatable.MemoryBytes, s.Memory)
	return r
}

// selectWindow returns the node samples from start on, with their times in
// c.nodeT, and the window's start and newest sample as Unix nanoseconds.
func (c *Calculator) selectWindow(samples []Sample, start, newest time.Time) (win []Sample, startN, newestN int64) {
	if newest.Before(start) {
		// The window holds no sample (window shorter than the stale window):
		// use the newest one alone.
		start = newest
	}
	i0 := len(samples) - 1
	for i0 > 0 && !samples[i0-1].Time.Before(start) {
		i0--
	}
	win = samples[i0:]
	c.nodeT = slices.Grow(c.nodeT[:0], len(win))[:len(win)]
	for i := range win {
		c.nodeT[i] = win[i].Time.UnixNano()
	}
	return win, start.UnixNano(), newest.UnixNano()
}

// alignPods sums into c.acc, at each node sample of the window, the usage of
// the pods aligned with it. It returns the requests of the regular pods the
// window does not measure (no sample in it, or not started by its newest
// sample) and how many they are.
func (c *Calculator) alignPods(pods []Pod, startN, newestN, tol int64, mur bool) (unmeasured amounts, count int) {
	nw := len(c.nodeT)
	c.acc = slices.Grow(c.acc[:0], nw)[:nw]
	clear(c.acc)
	for pi := range pods {
		p := &pods[pi]
		c.podSeries(p)
		measured := false
		if !p.Reclaimed {
			measured = len(c.pod.t) > 0 && c.pod.t[len(c.pod.t)-1] >= startN &&
				!p.StartTime.IsZero() && p.StartTime.UnixNano() <= newestN
			if !measured {
				count++
				unmeasured.add(p.Requests.CPUMilli, p.Requests.MemoryBytes)
			}
		}
		if len(c.pod.t) > 0 {
			alignPod(c.acc, c.nodeT, c.pod, p, tol, measured && mur)
		}
	}
	return unmeasured, count
}

// alignPod adds the pod's usage at each node sample to acc: that of its
// nearest sample within tol (none when farther), a reclaimed pod's at most
// its grant. With addRegMax (a measured regular pod under
// max-usage-request) it also adds max(usage, request).
func alignPod(acc []accum, nodeT []int64, pod columns, p *Pod, tol int64, addRegMax bool) {
	grant, req, reclaimed := p.Grant, p.Requests, p.Reclaimed
	// Local columns: the compiler keeps them out of memory in the loop.
	podT, podCPU, podMem := pod.t, pod.use[cpu], pod.use[memory]
	j := 0
	for i, t := range nodeT {
		// The pod sample nearest to t within tol, on a tie the earlier one.
		// Node times ascend, so the search goes on from the previous one.
		for j+1 < len(podT) && podT[j+1] <= t {
			j++
		}
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
		var uc, um int64 // the pod's usage at node sample i
		if best >= 0 {
			uc, um = podCPU[best], podMem[best]
			if reclaimed {
				uc, um = min(uc, grant.CPUMilli), min(um, grant.MemoryBytes)
			}
			a.pods.add(uc, um)
		}
		switch {
		case reclaimed:
			a.recl.add(uc, um)
		case addRegMax:
			a.regMax.add(max(uc, req.CPUMilli), max(um, req.MemoryBytes))
		}
	}
}

// resourceTerms builds the terms of resource k and its result: allocatable
// minus the margin, the regular peak usage and the unmeasured requests,
// clamped.
func (c *Calculator) resourceTerms(terms *[]reclaimable.Term, f *usageFormula, k resource, alloc int64, rs ResourceSettings) (reclaimable.ResourceExplanation, int64) {
	peak := c.regularPeak(f.win, k, f.peak, f.mur)
	system := c.systemPeak(f.win, k, f.peak)
	start := len(*terms)
	alloc = max(alloc, 0)
	marginPPM := toPPM(rs.Margin)
	margin := mulPPMCeil(alloc, marginPPM)
	*terms = append(*terms,
		reclaimable.Term{Name: TermAllocatable, Op: reclaimable.OpBase, Value: alloc},
		reclaimable.Term{Name: TermMargin, Op: reclaimable.OpSubtract, Value: margin, Note: c.note(noteKey{kind: noteMargin, a: marginPPM})},
		reclaimable.Term{Name: TermRegularPeakUsage, Op: reclaimable.OpSubtract, Value: peak, Note: f.peakNote},
		reclaimable.Term{Name: TermSystemUsage, Op: reclaimable.OpInfo, Value: system, Note: noteSystem},
		reclaimable.Term{Name: TermUnmeasuredRequests, Op: reclaimable.OpSubtract, Value: f.unmeasured[k], Note: f.unmeasuredNote},
	)
	v := alloc - margin - peak - f.unmeasured[k]
	v = c.clamp(terms, v, alloc, rs)
	t := *terms
	return reclaimable.ResourceExplanation{Terms: t[start:len(t):len(t)], Result: v}, v
}

// regularPeak is the statistic over the window of the usage of regular work
// of resource k: the node's minus the reclaimed pods', or under
// max-usage-request the system's (the node's beyond every pod's) plus each
// measured regular pod's max(usage, request).
func (c *Calculator) regularPeak(win []Sample, k resource, p Peak, mur bool) int64 {
	vals := slices.Grow(c.vals[:0], len(win))[:len(win)]
	for i := range win {
		node, a := win[i].usage()[k], &c.acc[i]
		if mur {
			vals[i] = max(node-a.pods[k], 0) + a.regMax[k]
		} else {
			vals[i] = max(node-a.recl[k], 0)
		}
	}
	c.vals = vals
	return statistic(vals, p)
}

// systemPeak is the statistic over the window of the node's usage of
// resource k beyond every pod's.
func (c *Calculator) systemPeak(win []Sample, k resource, p Peak) int64 {
	vals := slices.Grow(c.vals[:0], len(win))[:len(win)]
	for i := range win {
		vals[i] = max(win[i].usage()[k]-c.acc[i].pods[k], 0)
	}
	c.vals = vals
	return statistic(vals, p)
}

// podSeries puts the pod's samples, ascending by time, into c.pod: read from
// its Series, or from Samples (sorted into a scratch copy if needed).
func (c *Calculator) podSeries(p *Pod) {
	t, cpuUse, memUse := c.pod.t[:0], c.pod.use[cpu][:0], c.pod.use[memory][:0]
	if p.Series != (PodSeries{}) {
		t, cpuUse, memUse = p.Series.appendColumns(t, cpuUse, memUse)
	} else {
		for _, s := range sortedSamples(p.Samples, &c.podBuf) {
			t, cpuUse, memUse = append(t, s.Time.UnixNano()), append(cpuUse, s.CPUMilli), append(memUse, s.MemoryBytes)
		}
	}
	c.pod = columns{t: t, use: [numResources][]int64{cpuUse, memUse}}
}

func abs64(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}
