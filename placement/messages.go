package placement

import (
	"strconv"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// ReasonID says why a node is filtered out or a bind refused; its label
// (ReasonLabels) names it in the filtered-nodes and bind-conflict metrics.
// Stale nodes use the reclaimable.Reason* strings.
type ReasonID uint8

const (
	RNone ReasonID = iota
	RInsufficientCPU
	RInsufficientMemory
	RInsufficientBoth
	RUnknownNode
	RLimitsMismatch
	RNotEnforced
	RMissing
	RMalformed
	RTooOld
	RPublisherDown
	RFuture
	ROtherStale // a reclaimable reason this code does not know yet
	NReasons
)

var ReasonLabels = [NReasons]string{
	RInsufficientCPU:    "insufficient-cpu",
	RInsufficientMemory: "insufficient-memory",
	RInsufficientBoth:   "insufficient-cpu-and-memory",
	RUnknownNode:        "unknown-node",
	RLimitsMismatch:     "limits-mismatch",
	RNotEnforced:        "not-enforced",
	RMissing:            reclaimable.ReasonMissing,
	RMalformed:          reclaimable.ReasonMalformed,
	RTooOld:             reclaimable.ReasonWriteTooOld,
	RPublisherDown:      reclaimable.ReasonPublisherDown,
	RFuture:             reclaimable.ReasonFuture,
	ROtherStale:         "other-stale",
}

type ReasonCounts [NReasons]int

// MsgUnknownNode: the scheduler asked about a node the cache does not hold
// (its view is ahead of the cache's node informer).
const MsgUnknownNode = "node not found in the reclaimed-capacity cache"

// staleMessages say why a node offers no reclaimed room. They carry no
// per-node numbers (such as the annotation's age) on purpose: the
// scheduler's FailedScheduling event counts identical messages, so equal
// messages keep it short ("20 no reclaimed capacity: ...").
var staleMessages = [NReasons]string{
	RMissing:       "no reclaimed capacity: node has no reclaimable annotation (" + reclaimable.ReasonMissing + ")",
	RMalformed:     "no reclaimed capacity: node's reclaimable annotation is malformed (" + reclaimable.ReasonMalformed + ")",
	RTooOld:        "no reclaimed capacity: reclaimable annotation is stale, not rewritten within --stale-after (" + reclaimable.ReasonWriteTooOld + ")",
	RFuture:        "no reclaimed capacity: reclaimable annotation's write time is in the future, check clock skew (" + reclaimable.ReasonFuture + ")",
	RPublisherDown: "no reclaimed capacity: publisher is down, its leader lease was not renewed (" + reclaimable.ReasonPublisherDown + ")",
}

func staleID(reason string) ReasonID {
	switch reason {
	case reclaimable.ReasonMissing:
		return RMissing
	case reclaimable.ReasonMalformed:
		return RMalformed
	case reclaimable.ReasonWriteTooOld:
		return RTooOld
	case reclaimable.ReasonPublisherDown:
		return RPublisherDown
	case reclaimable.ReasonFuture:
		return RFuture
	}
	return ROtherStale
}

// appendFailure appends why req does not fit in st and returns RNone (and
// b unchanged) when it fits.
func appendFailure(b []byte, st State, req reclaimable.Resources) ([]byte, ReasonID) {
	switch {
	case !st.Known:
		return append(b, MsgUnknownNode...), RUnknownNode
	case !st.Fresh:
		id := staleID(st.Reason)
		if id == ROtherStale {
			return append(b, "no reclaimed capacity: reclaimable annotation not trusted ("+st.Reason+")"...), id
		}
		return append(b, staleMessages[id]...), id
	}
	cpuShort := req.CPUMilli > 0 && req.CPUMilli > st.Free.CPUMilli
	memShort := req.MemoryBytes > 0 && req.MemoryBytes > st.Free.MemoryBytes
	switch {
	case cpuShort && memShort:
		b = appendCPUShort(b, req, st.Free)
		b = append(b, "; "...)
		return appendMemoryShort(b, req, st.Free), RInsufficientBoth
	case cpuShort:
		return appendCPUShort(b, req, st.Free), RInsufficientCPU
	case memShort:
		return appendMemoryShort(b, req, st.Free), RInsufficientMemory
	}
	return b, RNone
}

// Failure says why req does not fit in st, for the filter answer. The
// messages without numbers are shared strings: a filter call can fail
// thousands of nodes for the same reason.
func Failure(st State, req reclaimable.Resources) (string, ReasonID) {
	switch {
	case !st.Known:
		return MsgUnknownNode, RUnknownNode
	case !st.Fresh:
		if id := staleID(st.Reason); id != ROtherStale {
			return staleMessages[id], id
		}
	}
	var buf [128]byte // on the stack: the string is the message's only allocation
	b, id := appendFailure(buf[:0], st, req)
	return string(b), id
}

// Fit says whether req fits in st; when not, the metrics label and the
// message for the scheduler.
func Fit(st State, req reclaimable.Resources) (reason, message string) {
	b, id := appendFailure(nil, st, req)
	switch id {
	case RNone:
		return "", ""
	case ROtherStale:
		return st.Reason, string(b)
	}
	return ReasonLabels[id], string(b)
}

// appendCPUShort: "reclaimed-cpu: need 2000m, free 500m".
func appendCPUShort(b []byte, req, free reclaimable.Resources) []byte {
	b = append(b, "reclaimed-cpu: need "...)
	b = strconv.AppendInt(b, req.CPUMilli, 10)
	b = append(b, "m, free "...)
	b = strconv.AppendInt(b, max(free.CPUMilli, 0), 10)
	return append(b, 'm')
}

// appendMemoryShort: "reclaimed-memory: need 2Gi, free 512Mi".
func appendMemoryShort(b []byte, req, free reclaimable.Resources) []byte {
	b = append(b, "reclaimed-memory: need "...)
	b = appendBytes(b, req.MemoryBytes)
	b = append(b, ", free "...)
	return appendBytes(b, max(free.MemoryBytes, 0))
}

// appendBytes renders a byte count in binary units: exact values as "512Mi",
// inexact ones rounded to one decimal with the exact count added,
// "1.5Gi (1610612737 bytes)".
func appendBytes(b []byte, n int64) []byte {
	units := [...]struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}}
	for _, u := range units {
		if n < u.size {
			continue
		}
		if n%u.size == 0 {
			return append(strconv.AppendInt(b, n/u.size, 10), u.suffix...)
		}
		b = strconv.AppendFloat(b, float64(n)/float64(u.size), 'f', 1, 64)
		b = append(b, u.suffix...)
		b = append(b, " ("...)
		b = strconv.AppendInt(b, n, 10)
		return append(b, " bytes)"...)
	}
	if n == 0 {
		return append(b, '0')
	}
	b = strconv.AppendInt(b, n, 10)
	return append(b, " bytes"...)
}

// MismatchMessage explains why a pod can never be placed on reclaimed capacity.
func MismatchMessage(n reclaimable.Names) string {
	return "pod's " + string(n.CPU) + "/" + string(n.Memory) +
		" requests differ from its limits (or a limit is missing): extended resources cannot be overcommitted, set requests equal to limits"
}
