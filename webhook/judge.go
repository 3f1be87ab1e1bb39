package webhook

import (
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// judgeEntry is the last reclaimable annotation value seen on a node and the
// same annotation without its explanation.
type judgeEntry struct {
	value, compact string
}

// maxJudged bounds the judge cache; past it the cache starts over (only
// node names that churn for a long time can get there).
const maxJudged = 1 << 16

// judge is reclaimable.Judge on the node's annotation. The annotation
// carries its explanation (most of its bytes) and changes only when the
// publisher rewrites it, so the value is parsed once per node and value, and
// Judge is given the same annotation re-marshalled without the explanation,
// which no verdict reads.
// A value that does not parse is judged as is.
func (h *nodeMutator) judge(node, value string, present bool, now time.Time) reclaimable.Freshness {
	alive := h.alive(now)
	if !present || node == "" {
		return reclaimable.Judge(value, present, now, h.staleAfter, alive)
	}
	h.judgeMu.RLock()
	e, ok := h.judged[node]
	h.judgeMu.RUnlock()
	if !ok || e.value != value {
		e = judgeEntry{value: value, compact: value}
		if a, err := reclaimable.Parse(value); err == nil && a.Explanation != nil {
			a.Explanation = nil
			if compact, err := a.Marshal(); err == nil {
				e.compact = compact
			}
		}
		h.judgeMu.Lock()
		if len(h.judged) >= maxJudged {
			clear(h.judged)
		}
		h.judged[node] = e
		h.judgeMu.Unlock()
	}
	return reclaimable.Judge(e.compact, true, now, h.staleAfter, alive)
}
