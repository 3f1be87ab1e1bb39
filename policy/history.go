package policy

import (
	"math"
	"sync"
	"time"
)

// History keeps a bounded usage history per node and per pod for the
// publisher: at most maxCount samples per series, none older than maxAge
// relative to the series' newest sample (or to now, on Prune).
//
// Samples are stored compactly (16 bytes each): times with one-second
// precision (rounded down, which only makes samples look older, and
// metrics.k8s.io timestamps are whole seconds in JSON anyway), CPU up to
// 2^32-1 millicores and memory up to 2^64-1 bytes; negative values are stored
// as zero. At 5000 nodes and 150,000 pods with 21 samples each that is about
// 52 MB.
//
// A series only grows: a sample that is not newer (by whole seconds) than the
// series' newest sample is dropped, so adding the same metrics twice is
// harmless. History is safe for concurrent use.
type History struct {
	mu       sync.RWMutex
	maxAge   int64 // seconds
	maxCount int
	nodes    map[string]*series
	pods     map[string]*series
}

type entry struct {
	sec uint32 // Unix seconds
	cpu uint32 // millicores
	mem uint64 // bytes
}

// series is a ring buffer: buf[head] is the oldest of n entries.
type series struct {
	buf     []entry
	head, n int
}

// NewHistory returns an empty history keeping at most maxCount samples (at
// least 1) no older than maxAge (at least one second) per series. Size it from
// the configuration: maxAge >= Config.MaxWindow() and maxCount >= maxAge /
// period + 1.
func NewHistory(maxAge time.Duration, maxCount int) *History {
	return &History{
		maxAge:   max(int64(maxAge/time.Second), 1),
		maxCount: max(maxCount, 1),
		nodes:    make(map[string]*series),
		pods:     make(map[string]*series),
	}
}

// AddNode records a usage sample of the named node and reports whether it was
// new.
func (h *History) AddNode(name string, s Sample) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return seriesOf(h.nodes, name).push(newEntry(s), h.maxAge, h.maxCount)
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
	return sr.push(newEntry(s), h.maxAge, h.maxCount)
}

// AppendNode appends the node's samples, oldest first, to dst (times in UTC).
func (h *History) AppendNode(dst []Sample, name string) []Sample {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodes[name].appendTo(dst)
}

// AppendPod appends the pod's samples, oldest first, to dst (times in UTC);
// the key is in bytes as for AddPod.
func (h *History) AppendPod(dst []Sample, key []byte) []Sample {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.pods[string(key)].appendTo(dst)
}

// DeleteNode forgets a node.
func (h *History) DeleteNode(name string) {
	h.mu.Lock()
	delete(h.nodes, name)
	h.mu.Unlock()
}

// DeletePod forgets a pod.
func (h *History) DeletePod(uid string) {
	h.mu.Lock()
	delete(h.pods, uid)
	h.mu.Unlock()
}

// Prune drops samples older than maxAge before now and forgets series left
// empty (nodes and pods that stopped reporting).
func (h *History) Prune(now time.Time) {
	cutoff := now.Unix() - h.maxAge
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range []map[string]*series{h.nodes, h.pods} {
		for k, s := range m {
			s.dropBefore(cutoff)
			if s.n == 0 {
				delete(m, k)
			}
		}
	}
}

// Len returns the number of node and pod series.
func (h *History) Len() (nodes, pods int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.nodes), len(h.pods)
}

func newEntry(s Sample) entry {
	return entry{
		sec: uint32(clampInt(s.Time.Unix(), 0, math.MaxUint32)),
		cpu: uint32(clampInt(s.CPUMilli, 0, math.MaxUint32)),
		mem: uint64(max(s.MemoryBytes, 0)),
	}
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

// appendTo appends the samples of s (nil: none).
func (s *series) appendTo(dst []Sample) []Sample {
	if s == nil {
		return dst
	}
	first := s.buf[s.head:min(s.head+s.n, len(s.buf))]
	for _, part := range [2][]entry{first, s.buf[:s.n-len(first)]} {
		for _, e := range part {
			dst = append(dst, Sample{Time: time.Unix(int64(e.sec), 0).UTC(), CPUMilli: int64(e.cpu), MemoryBytes: int64(min(e.mem, math.MaxInt64))})
		}
	}
	return dst
}

func (s *series) push(e entry, maxAge int64, maxCount int) bool {
	if s.n > 0 && e.sec <= s.buf[(s.head+s.n-1)%len(s.buf)].sec {
		return false
	}
	s.dropBefore(int64(e.sec) - maxAge)
	if s.n == maxCount {
		s.head = (s.head + 1) % len(s.buf)
		s.n--
	}
	if s.n == len(s.buf) {
		// Grow: double up to maxCount, oldest first.
		nb := make([]entry, min(max(2*len(s.buf), 4), maxCount))
		for i := 0; i < s.n; i++ {
			nb[i] = s.buf[(s.head+i)%len(s.buf)]
		}
		s.buf, s.head = nb, 0
	}
	s.buf[(s.head+s.n)%len(s.buf)] = e
	s.n++
	return true
}

func (s *series) dropBefore(cutoff int64) {
	for s.n > 0 && int64(s.buf[s.head].sec) < cutoff {
		s.head = (s.head + 1) % len(s.buf)
		s.n--
	}
}

func clampInt(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
