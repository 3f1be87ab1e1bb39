package policy

import (
	"math"
	"slices"
	"sync"
	"time"
)

// History keeps a bounded usage history per node and per pod for the
// publisher: at most maxCount samples per series, none older than maxAge
// relative to the series' newest sample (or to now, on Prune).
//
// Samples are stored compactly, in 10 bytes (see entry): the history is the
// largest part of a publisher's heap, some 21 samples for each of 150,000 pods
// at 5,000 nodes with the default window and a 15 s metrics resolution. For
// that, a history keeps at most MaxHistoryAge, 18 hours, and at most 32,767
// samples per series.
//
// A series only grows: a sample that is not newer (by whole seconds) than the
// series' newest sample is dropped, so adding the same metrics twice is
// harmless. History is safe for concurrent use, but for reading a PodSeries
// (see there).
type History struct {
	mu       sync.RWMutex
	maxAge   int64 // seconds
	maxCount int
	nodes    map[string]*series
	pods     map[string]*series
	// podSweep is when Prune last went through the pod series (Unix
	// seconds).
	podSweep int64
}

// entry is a sample in 10 bytes rather than 16 (a uint64 field would align
// the struct to 8, and a full Unix second take 4 bytes): the low 16 bits of
// its time in whole Unix seconds (rounded down, which only makes a sample
// look older; metrics.k8s.io timestamps are whole seconds in JSON anyway),
// which with the series' newest second give the whole time, as no entry is
// kept more than MaxHistoryAge before the newest; then CPU and memory packed
// into 64 bits split in four words. CPU takes the low cpuBits (up to 4,194
// cores), memory the rest: in bytes below 2 TiB, exactly, and above that in
// KiB rounded up (up to 2 PiB), so that large nodes lose no more than a KiB
// and no usage is stored as less than it was. Negative values are stored as
// zero, larger ones as the largest.
type entry struct {
	sec uint16
	v   [4]uint16
}

// MaxHistoryAge is the most a History keeps: an entry keeps 16 bits of its
// time. The policy reads an hour at most (its longest window) and the stale
// window beyond it.
const MaxHistoryAge = math.MaxUint16 * time.Second

const (
	cpuBits   = 22
	cpuMax    = 1<<cpuBits - 1
	memBits   = 64 - cpuBits - 1 // the remaining bit says the unit
	memMax    = 1<<memBits - 1
	memKiBBit = uint64(1) << 63
)

// series is a ring buffer: buf[head] is the oldest of n entries, newest the
// Unix second of the newest. int16 indices keep the header in 32 bytes, one
// per pod.
type series struct {
	buf     []entry
	head, n int16
	newest  uint32
}

// NewHistory returns an empty history keeping at most maxCount samples (at
// least 1, at most 32,767) no older than maxAge (at least one second, at most
// MaxHistoryAge) per series. Size it from
// the configuration: maxAge >= Config.MaxWindow() and maxCount >= maxAge /
// period + 1.
func NewHistory(maxAge time.Duration, maxCount int) *History {
	return &History{
		maxAge:   historyAge(maxAge),
		maxCount: historyCount(maxCount),
		nodes:    make(map[string]*series),
		pods:     make(map[string]*series),
	}
}

// Resize changes the limits of NewHistory and keeps the samples within them:
// each series keeps its newest maxCount samples no older than maxAge before
// its newest one. A policy reload that changes how far back the policy reads
// then keeps the usage it has, where a new history would make every peak
// look at a few samples, and publish more, for a window.
func (h *History) Resize(maxAge time.Duration, maxCount int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.maxAge = historyAge(maxAge)
	h.maxCount = historyCount(maxCount)
	for _, m := range []map[string]*series{h.nodes, h.pods} {
		for _, s := range m {
			s.limit(h.maxAge, h.maxCount)
		}
	}
}

func historyAge(d time.Duration) int64 {
	return int64(min(max(d, time.Second), MaxHistoryAge) / time.Second)
}

func historyCount(n int) int { return min(max(n, 1), math.MaxInt16) }

// AddNode records a usage sample of the named node and reports whether it was
// new.
func (h *History) AddNode(name string, s Sample) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return seriesOf(h.nodes, name).push(s, h.maxAge, h.maxCount)
}

// AddPod records a usage sample of the pod with the given key and reports
// whether it was new. The key is in bytes so that the series of a pod seen
// before is found without making a string of it (a publisher adds a sample
// for every pod of the cluster every period).
func (h *History) AddPod(key []byte, s Sample) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	sr := h.pods[string(key)]
	if sr == nil {
		sr = seriesOf(h.pods, string(key))
	}
	return sr.push(s, h.maxAge, h.maxCount)
}

// AppendNode appends the node's samples, oldest first, to dst (times in UTC).
func (h *History) AppendNode(dst []Sample, name string) []Sample {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodes[name].appendTo(dst)
}

// PodSeries is a pod's series, looked up once (FindPod) and then read
// without a lookup (as Pod.Series, or AppendPodSeries): at 150,000 pods the
// two lookups a period, one to add a sample and one to read the series, were
// a seventh of the publisher's CPU, mostly cache misses in the table. The
// zero value is no series. Once the history forgets the pod (Prune,
// DeletePod) the handle reads nothing and says so (Live): a pod that reports
// again has a new series.
//
// A PodSeries is read without the History's lock: the history must not be
// written (added to, pruned, resized, deleted from) while one is read. The
// publisher does both from its cycle alone.
type PodSeries struct{ s *series }

// Live reports whether ps is a series of its history: false for the zero
// value and for a pod the history has forgotten since FindPod.
func (ps PodSeries) Live() bool { return ps.s != nil && !ps.s.forgotten() }

// FindPod returns the series of the pod with the given key (as for AddPod),
// or the zero PodSeries when it has none yet.
func (h *History) FindPod(key []byte) PodSeries {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return PodSeries{h.pods[string(key)]}
}

// AppendPodSeries appends the samples of ps, oldest first, to dst (times in
// UTC) and reports whether ps is still a series of the history (Live).
func (h *History) AppendPodSeries(dst []Sample, ps PodSeries) ([]Sample, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !ps.Live() {
		return dst, false
	}
	return ps.s.appendTo(dst), true
}

// appendColumns appends the times (Unix nanoseconds), CPU and memory of the
// samples of ps, oldest first: what Compute reads, without building a Sample
// of each.
func (ps PodSeries) appendColumns(t, cpu, mem []int64) ([]int64, []int64, []int64) {
	if !ps.Live() {
		return t, cpu, mem
	}
	for _, part := range ps.s.parts() {
		for _, e := range part {
			c, m := e.values()
			t, cpu, mem = append(t, ps.s.secOf(e)*int64(time.Second)), append(cpu, c), append(mem, m)
		}
	}
	return t, cpu, mem
}

// Newest returns the newest sample of ps, and false when it has none (or
// is not Live): the publisher reads every regular pod's latest usage each
// cycle, and copying whole series for one sample would double the policy's
// reads.
func (ps PodSeries) Newest() (Sample, bool) {
	if !ps.Live() || ps.s.n == 0 {
		return Sample{}, false
	}
	return ps.s.sample(ps.s.buf[(int(ps.s.head)+int(ps.s.n)-1)%len(ps.s.buf)]), true
}

// DeleteNode forgets a node.
func (h *History) DeleteNode(name string) {
	h.mu.Lock()
	forget(h.nodes, name)
	h.mu.Unlock()
}

// DeletePod forgets a pod.
func (h *History) DeletePod(key string) {
	h.mu.Lock()
	forget(h.pods, key)
	h.mu.Unlock()
}

// Prune drops samples older than maxAge before now and forgets series left
// empty (nodes and pods that stopped reporting).
//
// Node series are gone through on every call, pod series only once a
// quarter of maxAge has passed since the last time: a pod that reports drops
// its old samples itself as it adds one (push), so going through 150,000
// pod series finds little but the pods that stopped reporting, and it took
// about a twentieth of a publisher's CPU at that scale. Until then a
// stopped pod keeps its samples, which a reader of the history must judge by
// their times anyway (the policy reads nothing older than its window and
// alignment).
func (h *History) Prune(now time.Time) {
	sec := now.Unix()
	cutoff := sec - h.maxAge
	h.mu.Lock()
	defer h.mu.Unlock()
	prune(h.nodes, cutoff)
	if sec-h.podSweep >= max(h.maxAge/4, 1) || sec < h.podSweep {
		prune(h.pods, cutoff)
		h.podSweep = sec
	}
}

// prune drops the samples of m before cutoff and forgets the series left
// empty; the caller holds the write lock.
func prune(m map[string]*series, cutoff int64) {
	for k, s := range m {
		s.dropBefore(cutoff)
		if s.n == 0 {
			s.markForgotten()
			delete(m, k)
		}
	}
}

// Len returns the number of node and pod series.
func (h *History) Len() (nodes, pods int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.nodes), len(h.pods)
}

// sampleSecond is the Unix second of s as a series keeps it.
func sampleSecond(s Sample) uint32 { return uint32(clampInt(s.Time.Unix(), 0, math.MaxUint32)) }

// newEntry packs s, whose second (sampleSecond) is sec.
func newEntry(s Sample, sec uint32) entry {
	v := uint64(clampInt(s.CPUMilli, 0, cpuMax))
	switch mem := uint64(max(s.MemoryBytes, 0)); {
	case mem <= memMax:
		v |= mem << cpuBits
	default:
		v |= memKiBBit | min((mem+1023)/1024, memMax)<<cpuBits
	}
	return entry{sec: uint16(sec), v: [4]uint16{uint16(v), uint16(v >> 16), uint16(v >> 32), uint16(v >> 48)}}
}

// secOf is the Unix second of e, an entry of s.
func (s *series) secOf(e entry) int64 {
	return int64(s.newest - uint32(uint16(s.newest)-e.sec))
}

func (s *series) sample(e entry) Sample {
	cpu, mem := e.values()
	return Sample{Time: time.Unix(s.secOf(e), 0).UTC(), CPUMilli: cpu, MemoryBytes: mem}
}

// values returns the CPU (millicores) and memory (bytes) of e.
func (e entry) values() (cpu, mem int64) {
	v := uint64(e.v[0]) | uint64(e.v[1])<<16 | uint64(e.v[2])<<32 | uint64(e.v[3])<<48
	m := v &^ memKiBBit >> cpuBits
	if v&memKiBBit != 0 {
		m *= 1024
	}
	return int64(v & cpuMax), int64(m)
}

// seriesOf returns the series of key in m, created if new; the caller holds
// the write lock.
func seriesOf(m map[string]*series, key string) *series {
	sr := m[key]
	if sr == nil {
		sr = &series{}
		m[key] = sr
	}
	return sr
}

// forget removes key's series from m and marks it forgotten for the
// PodSeries that still point to it; the caller holds the write lock.
func forget(m map[string]*series, key string) {
	if s := m[key]; s != nil {
		s.markForgotten()
		delete(m, key)
	}
}

// markForgotten empties s for good (see PodSeries).
func (s *series) markForgotten() { *s = series{head: -1} }

// forgotten reports whether s was removed from its history.
func (s *series) forgotten() bool { return s.head < 0 }

// appendTo appends the samples of s (nil: none).
func (s *series) appendTo(dst []Sample) []Sample {
	if s == nil {
		return dst
	}
	for _, part := range s.parts() {
		for _, e := range part {
			dst = append(dst, s.sample(e))
		}
	}
	return dst
}

// parts returns the entries of s, oldest first, in the two pieces the ring
// holds them in.
func (s *series) parts() [2][]entry {
	first := s.buf[s.head:min(int(s.head)+int(s.n), len(s.buf))]
	return [2][]entry{first, s.buf[:int(s.n)-len(first)]}
}

// copyTo copies the entries of s, oldest first, to the start of dst.
func (s *series) copyTo(dst []entry) {
	p := s.parts()
	copy(dst[copy(dst, p[0]):], p[1])
}

func (s *series) push(smp Sample, maxAge int64, maxCount int) bool {
	sec := sampleSecond(smp)
	if s.n > 0 && sec <= s.newest {
		return false
	}
	// Dropped before newest moves on: the entries left are within maxAge,
	// so within 16 bits, of the new newest.
	s.dropBefore(int64(sec) - maxAge)
	if int(s.n) == maxCount {
		s.head = int16((int(s.head) + 1) % len(s.buf))
		s.n--
	}
	if int(s.n) == len(s.buf) {
		// Grow to what the allocation's size class holds, up to maxCount,
		// oldest first.
		nb := slices.Grow([]entry(nil), s.grownSize(maxAge, maxCount))
		nb = nb[:min(cap(nb), maxCount)]
		s.copyTo(nb)
		s.buf, s.head = nb, 0
	}
	s.buf[(int(s.head)+int(s.n))%len(s.buf)] = newEntry(smp, sec)
	s.n++
	s.newest = sec
	return true
}

// grownSize is the size a full ring grows to. Once it holds a few samples,
// their spacing says how many maxAge holds, plus one for a sample right at
// the cutoff and one for jitter in the spacing: maxCount is sized for the
// shortest scrape interval, and growing by a quarter at a time took a ring
// to 26 entries, through five smaller ones, for the 21 samples of the
// defaults at the usual 15 s. Should the spacing shrink later, the ring
// grows by a quarter at a time.
func (s *series) grownSize(maxAge int64, maxCount int) int {
	size := int64(len(s.buf))
	next := size + max(size/4, 4)
	if s.n >= 2 {
		if span := int64(s.newest) - s.secOf(s.buf[s.head]); span > 0 {
			next = max(next, maxAge*int64(s.n-1)/span+2)
		}
	}
	return int(min(next, int64(maxCount)))
}

// limit drops the oldest samples until at most maxCount are left, none older
// than maxAge before the newest, and shrinks a ring larger than maxCount.
func (s *series) limit(maxAge int64, maxCount int) {
	if s.n == 0 {
		return
	}
	s.dropBefore(int64(s.newest) - maxAge)
	for int(s.n) > maxCount {
		s.head = int16((int(s.head) + 1) % len(s.buf))
		s.n--
	}
	if len(s.buf) > maxCount {
		nb := make([]entry, maxCount)
		s.copyTo(nb)
		s.buf, s.head = nb, 0
	}
}

func (s *series) dropBefore(cutoff int64) {
	for s.n > 0 && s.secOf(s.buf[s.head]) < cutoff {
		s.head = int16((int(s.head) + 1) % len(s.buf))
		s.n--
	}
}

func clampInt(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
