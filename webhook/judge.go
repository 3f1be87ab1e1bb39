package webhook

import (
	"hash/maphash"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// judgeEntry is the last reclaimable annotation value seen on a node, kept
// as its hash and length, and the same annotation without its explanation.
type judgeEntry struct {
	sum     uint64
	size    int
	compact string
}

// Bounds of the judge cache. Reviews sent to the webhook directly can carry
// any node name and value, so the cache is bounded by entries and by bytes
// whatever the input, and past either bound it starts over (real nodes are
// then parsed once more). A value is remembered by a hash keyed with a seed
// drawn at start, which an attacker cannot aim a collision at, so an entry's
// size does not depend on the value's; only values a publisher could have
// written (maxJudgedValueBytes) and names the apiserver accepts
// (maxNodeNameBytes) are cached, so a compact form is small.
const (
	maxJudged           = 1 << 15
	maxJudgedBytes      = 8 << 20
	maxJudgedValueBytes = 4 << 10
	// maxNodeNameBytes is the longest name of a stored Node (a DNS subdomain).
	maxNodeNameBytes = 253
	// judgeEntryOverhead approximates an entry's map and header bytes.
	judgeEntryOverhead = 64
)

// judge is reclaimable.Judge on the node's annotation. The annotation
// carries its explanation (most of its bytes) and changes only when the
// publisher rewrites it, so the value is parsed once per node and value, and
// Judge is given the same annotation re-marshalled without the explanation,
// which no verdict reads.
// A value that does not parse is judged as is.
func (h *nodeMutator) judge(node, value string, present bool, now time.Time) reclaimable.Freshness {
	alive := h.alive(now)
	if !present || node == "" || len(node) > maxNodeNameBytes || len(value) > maxJudgedValueBytes {
		return reclaimable.Judge(value, present, now, h.staleAfter, alive)
	}
	sum := maphash.String(h.judgeSeed, value)
	h.judgeMu.RLock()
	e, ok := h.judged[node]
	h.judgeMu.RUnlock()
	if !ok || e.sum != sum || e.size != len(value) {
		e = judgeEntry{sum: sum, size: len(value), compact: value}
		if a, err := reclaimable.Parse(value); err == nil && a.Explanation != nil {
			a.Explanation = nil
			if compact, err := a.Marshal(); err == nil {
				e.compact = compact
			}
		}
		h.remember(node, e)
	}
	return reclaimable.Judge(e.compact, true, now, h.staleAfter, alive)
}

func (h *nodeMutator) remember(node string, e judgeEntry) {
	size := len(node) + len(e.compact) + judgeEntryOverhead
	h.judgeMu.Lock()
	defer h.judgeMu.Unlock()
	if old, ok := h.judged[node]; ok {
		h.judgedBytes -= len(node) + len(old.compact) + judgeEntryOverhead
	}
	if len(h.judged) >= maxJudged || h.judgedBytes+size > maxJudgedBytes {
		// A new map: clear keeps the buckets the old one grew to.
		h.judged = make(map[string]judgeEntry)
		h.judgedBytes = 0
	}
	h.judged[node] = e
	h.judgedBytes += size
}
