package extender

import (
	"strconv"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// reasonID says why a node is filtered out or a bind refused; its label
// (reasonLabels) names it in the filtered-nodes and bind-conflict metrics.
// Stale nodes use the reclaimable.Reason* strings.
type reasonID uint8

const (
	rNone reasonID = iota
	rInsufficientCPU
	rInsufficientMemory
	rInsufficientBoth
	rUnknownNode
	rLimitsMismatch
	rNotEnforced
	rMissing
	rMalformed
	rTooOld
	rPublisherDown
	rFuture
	rOtherStale // a reclaimable reason this code does not know yet
	nReasons
)

var reasonLabels = [nReasons]string{
	rInsufficientCPU:    "insufficient-cpu",
	rInsufficientMemory: "insufficient-memory",
	rInsufficientBoth:   "insufficient-cpu-and-memory",
	rUnknownNode:        "unknown-node",
	rLimitsMismatch:     "limits-mismatch",
	rNotEnforced:        "not-enforced",
	rMissing:            reclaimable.ReasonMissing,
	rMalformed:          reclaimable.ReasonMalformed,
	rTooOld:             reclaimable.ReasonWriteTooOld,
	rPublisherDown:      reclaimable.ReasonPublisherDown,
	rFuture:             reclaimable.ReasonFuture,
	rOtherStale:         "other-stale",
}

type reasonCounts [nReasons]int

const msgUnknownNode = "node not found in extender cache"

// staleMessages say why a node offers no reclaimed room. They carry no
// per-node numbers (such as the annotation's age) on purpose: the
// scheduler's FailedScheduling event counts identical messages, so equal
// messages keep it short ("20 no reclaimed capacity: ...").
var staleMessages = [nReasons]string{
	rMissing:       "no reclaimed capacity: node has no reclaimable annotation (" + reclaimable.ReasonMissing + ")",
	rMalformed:     "no reclaimed capacity: node's reclaimable annotation is malformed (" + reclaimable.ReasonMalformed + ")",
	rTooOld:        "no reclaimed capacity: reclaimable annotation is stale, not rewritten within --stale-after (" + reclaimable.ReasonWriteTooOld + ")",
	rFuture:        "no reclaimed capacity: reclaimable annotation's write time is in the future, check clock skew (" + reclaimable.ReasonFuture + ")",
	rPublisherDown: "no reclaimed capacity: publisher is down, its leader lease was not renewed (" + reclaimable.ReasonPublisherDown + ")",
}

func staleID(reason string) reasonID {
	switch reason {
	case reclaimable.ReasonMissing:
		return rMissing
	case reclaimable.ReasonMalformed:
		return rMalformed
	case reclaimable.ReasonWriteTooOld:
		return rTooOld
	case reclaimable.ReasonPublisherDown:
		return rPublisherDown
	case reclaimable.ReasonFuture:
		return rFuture
	}
	return rOtherStale
}

// appendFailure appends why req does not fit in st and returns rNone (and
// b unchanged) when it fits.
func appendFailure(b []byte, st nodeState, req reclaimable.Resources) ([]byte, reasonID) {
	switch {
	case !st.known:
		return append(b, msgUnknownNode...), rUnknownNode
	case !st.fresh:
		id := staleID(st.reason)
		if id == rOtherStale {
			return append(b, "no reclaimed capacity: reclaimable annotation not trusted ("+st.reason+")"...), id
		}
		return append(b, staleMessages[id]...), id
	}
	cpuShort := req.CPUMilli > 0 && req.CPUMilli > st.free.CPUMilli
	memShort := req.MemoryBytes > 0 && req.MemoryBytes > st.free.MemoryBytes
	switch {
	case cpuShort && memShort:
		b = appendCPUShort(b, req, st.free)
		b = append(b, "; "...)
		return appendMemoryShort(b, req, st.free), rInsufficientBoth
	case cpuShort:
		return appendCPUShort(b, req, st.free), rInsufficientCPU
	case memShort:
		return appendMemoryShort(b, req, st.free), rInsufficientMemory
	}
	return b, rNone
}

// failure says why req does not fit in st, for the filter answer. The
// messages without numbers are shared strings: a filter call can fail
// thousands of nodes for the same reason.
func failure(st nodeState, req reclaimable.Resources) (string, reasonID) {
	switch {
	case !st.known:
		return msgUnknownNode, rUnknownNode
	case !st.fresh:
		if id := staleID(st.reason); id != rOtherStale {
			return staleMessages[id], id
		}
	}
	var buf [128]byte // on the stack: the string is the message's only allocation
	b, id := appendFailure(buf[:0], st, req)
	return string(b), id
}

// fit says whether req fits in st; when not, the metrics label and the
// message for the scheduler.
func fit(st nodeState, req reclaimable.Resources) (reason, message string) {
	b, id := appendFailure(nil, st, req)
	switch id {
	case rNone:
		return "", ""
	case rOtherStale:
		return st.reason, string(b)
	}
	return reasonLabels[id], string(b)
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

// mismatchMessage explains why a pod can never be placed on reclaimed capacity.
func mismatchMessage(n reclaimable.Names) string {
	return "pod's " + string(n.CPU) + "/" + string(n.Memory) +
		" requests differ from its limits (or a limit is missing): extended resources cannot be overcommitted, set requests equal to limits"
}

// notEnforcedMessage explains why a reclaimed pod without the pod webhook's
// limits is refused: err (from enforcement.Enforced) names each container
// and what it lacks. The same text goes to every node of a filter call, so
// the FailedScheduling event shows it once.
func notEnforcedMessage(err error) string {
	return err.Error() + " (refused by the extender's --require-enforced: without native limits kubelet would not hold the pod to its grant)"
}
