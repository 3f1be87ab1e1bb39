package webhook

import (
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// nodeObject is the slim view of a Node: only what the node mutator reads.
// Everything else (images, conditions, managedFields) is skipped by the
// decoder without being copied.
type nodeObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        *nodeMeta   `json:"metadata"`
	Status          *nodeStatus `json:"status"`
}

type nodeMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels" maxItems:"4096"`
	Annotations map[string]string `json:"annotations" maxItems:"4096"`
}

// nodeStatus keeps resource values as the strings stored: a value is
// compared by quantity only where the webhook writes it, and a spelling it
// cannot parse must not make the whole review undecodable.
type nodeStatus struct {
	Capacity    map[string]string `json:"capacity" maxItems:"1024"`
	Allocatable map[string]string `json:"allocatable" maxItems:"1024"`
}

// nodeMutator sets the reclaimed resources (and the opt-in native oversell)
// on node status writes.
type nodeMutator struct {
	names      reclaimable.Names
	staleAfter time.Duration
	alive      func(time.Time) bool
	metrics    *metrics
	now        func() time.Time
	escaped    map[string]string // JSON Pointer escapes of the keys patched

	// oversell false ignores every oversell ratio (--oversell=false): nodes
	// that carry a record get their raw allocatable back.
	oversell bool

	invalidMu     sync.Mutex
	invalidLogged map[uint64]uint64 // hash of node, place and key -> hash of the value last logged

	judgeMu     sync.RWMutex
	judgeSeed   maphash.Seed
	judged      map[string]judgeEntry // node name -> last annotation seen
	judgedBytes int                   // approximate bytes held by judged
}

// maxLogged bounds invalidLogged; past it, it starts over and each problem
// is logged once more. Entries are two hashes, so the bound holds whatever
// the names and values a forged review carries.
const maxLogged = 1 << 14

// logOnce reports whether the problem (node, place, key) with this value
// has not been logged yet with the same value, and remembers it.
func (h *nodeMutator) logOnce(node, place, key, value string) bool {
	id := maphash.Comparable(h.judgeSeed, [3]string{node, place, key})
	v := maphash.String(h.judgeSeed, value)
	h.invalidMu.Lock()
	defer h.invalidMu.Unlock()
	if last, seen := h.invalidLogged[id]; seen && last == v {
		return false
	}
	if len(h.invalidLogged) >= maxLogged {
		h.invalidLogged = make(map[uint64]uint64)
	}
	h.invalidLogged[id] = v
	return true
}

func newNodeMutator(names reclaimable.Names, staleAfter time.Duration, alive func(time.Time) bool, m *metrics) *nodeMutator {
	if alive == nil {
		alive = func(time.Time) bool { return true }
	}
	n := &nodeMutator{
		names:         names,
		staleAfter:    staleAfter,
		alive:         alive,
		metrics:       m,
		now:           time.Now,
		escaped:       map[string]string{},
		oversell:      true,
		invalidLogged: map[uint64]uint64{},
		judgeSeed:     maphash.MakeSeed(),
		judged:        map[string]judgeEntry{},
	}
	for _, k := range []string{string(names.CPU), string(names.Memory), "cpu", "memory", OversellRecordAnnotation(names)} {
		n.escaped[k] = escapeKey(k)
	}
	return n
}

// handles reports whether the webhook mutates this request: UPDATE of
// nodes/status, and CREATE of nodes (a kubelet's first registration).
func (h *nodeMutator) handles(req *admissionRequest[nodeObject]) bool {
	if req.Resource.Group != "" || req.Resource.Resource != "nodes" {
		return false
	}
	return (req.Operation == admissionv1.Update && req.SubResource == "status") ||
		(req.Operation == admissionv1.Create && req.SubResource == "")
}

// mutate computes the JSONPatch operations for one node; none when nothing
// changes.
func (h *nodeMutator) mutate(req *admissionRequest[nodeObject]) ([]patchOp, error) {
	node, nodeName := req.Object, req.Name
	if nodeName == "" && node.Metadata != nil {
		nodeName = node.Metadata.Name
	}
	var annotations map[string]string
	if node.Metadata != nil {
		annotations = node.Metadata.Annotations
	}
	f := h.judgeNode(nodeName, annotations)
	var capacity, allocatable map[string]string
	if node.Status != nil {
		capacity, allocatable = node.Status.Capacity, node.Status.Allocatable
	}
	capP, allocP := h.reclaimedPatches(nodeName, f, capacity, allocatable)
	reclaimedChanged := !capP.empty() || !allocP.empty()
	annP := mapPatch{path: "/metadata/annotations", current: annotations, escaped: h.escaped}
	ov := h.oversellPatches(nodeName, node, &allocP, &annP)

	ops := statusOps(node, &capP, &allocP)
	if node.Metadata != nil {
		ops = annP.ops(ops)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	h.countPatches(reclaimedChanged, ov, &annP)
	return ops, nil
}

// judgeNode reads the node's annotation as the webhook trusts it, and counts
// and logs a node that gets no room.
func (h *nodeMutator) judgeNode(nodeName string, annotations map[string]string) reclaimable.Freshness {
	value, present := annotations[h.names.Annotation]
	f := h.judge(nodeName, value, present, h.now())
	if !f.Fresh {
		h.metrics.stale.WithLabelValues(f.Reason).Inc()
		if logrus.IsLevelEnabled(logrus.DebugLevel) {
			logrus.WithFields(logrus.Fields{"node": truncated(nodeName), "reason": f.Reason, "detail": truncated(f.Detail),
				"heldCPU": f.Held.CPUMilli, "heldMemory": f.Held.MemoryBytes}).Debug("no room; injecting what reclaimed pods held")
		}
	}
	return f
}

// reclaimedPatches sets the reclaimed resources in capacity and allocatable
// where they differ from what the node should carry.
func (h *nodeMutator) reclaimedPatches(nodeName string, f reclaimable.Freshness, capacity, allocatable map[string]string) (capP, allocP mapPatch) {
	// The status value is the room (zero unless fresh) floored at what the
	// annotation says reclaimed pods held, so that kubelet, re-admitting
	// every pod when it restarts, rejects none of them; see
	// docs/design.md#two-numbers-per-node.
	want := h.clamp(nodeName, f.Room.Max(f.Held), capacity, allocatable)
	capP = mapPatch{path: "/status/capacity", current: capacity, escaped: h.escaped}
	allocP = mapPatch{path: "/status/allocatable", current: allocatable, escaped: h.escaped}
	cpu, mem := string(h.names.CPU), string(h.names.Memory)
	cpuStr, memStr := strconv.FormatInt(want.CPUMilli, 10), strconv.FormatInt(want.MemoryBytes, 10)
	for _, p := range []*mapPatch{&capP, &allocP} {
		if !quantityIs(p.current, cpu, want.CPUMilli, cpuStr) {
			p.setValue(cpu, cpuStr)
		}
		if !quantityIs(p.current, mem, want.MemoryBytes, memStr) {
			p.setValue(mem, memStr)
		}
	}
	return capP, allocP
}

// oversellPatches adds native oversell's allocatable and its record
// annotation to the patches; nil when the node has no oversell to apply or
// restore.
func (h *nodeMutator) oversellPatches(nodeName string, node *nodeObject, allocP, annP *mapPatch) *oversellChange {
	ov := computeOversell(h.names, node.Metadata, node.Status, h.oversell)
	if ov == nil {
		return nil
	}
	h.reportOversellProblems(nodeName, ov)
	for _, k := range sortedKeys(ov.allocatable) {
		allocP.setValue(k, ov.allocatable[k])
	}
	recKey := OversellRecordAnnotation(h.names)
	if ov.record != nil {
		annP.setValue(recKey, *ov.record)
	}
	if ov.removeRec {
		annP.removeKey(recKey)
	}
	return ov
}

// statusOps turns the capacity and allocatable patches into operations; a
// node sent without a status gets one whole.
func statusOps(node *nodeObject, capP, allocP *mapPatch) []patchOp {
	ops := make([]patchOp, 0, 6)
	if node.Status != nil {
		ops = capP.ops(ops)
		return allocP.ops(ops)
	}
	if capP.empty() && allocP.empty() {
		return ops
	}
	status := map[string]map[string]string{}
	if len(capP.set) > 0 {
		status["capacity"] = capP.set
	}
	if len(allocP.set) > 0 {
		status["allocatable"] = allocP.set
	}
	return append(ops, patchOp{Op: "add", Path: "/status", Value: status})
}

// countPatches counts a patch that is sent, by what it changes.
func (h *nodeMutator) countPatches(reclaimedChanged bool, ov *oversellChange, annP *mapPatch) {
	if reclaimedChanged {
		h.metrics.patchReclaimed.Inc()
	}
	if ov == nil {
		return
	}
	if ov.applied {
		h.metrics.patches.WithLabelValues(PatchOversell).Inc()
	}
	if ov.restored {
		h.metrics.patches.WithLabelValues(PatchOversellRestore).Inc()
	}
	if !annP.empty() {
		h.metrics.patches.WithLabelValues(PatchOversellRecord).Inc()
	}
}

// clamp lowers a value above the node's native size in the same object to
// it: min(allocatable, capacity) of cpu and memory. The annotation is only as
// trustworthy as whoever can write the node: a bug, a hand edit or a node
// annotating itself must not create capacity out of nothing. The incoming
// object is what the writer sent (kubelet's raw allocatable, or the stored
// one for partial writers, inflated on an oversold node), so capacity bounds
// an allocatable the writer inflated. A value that is absent, does not parse
// or is negative bounds at 0: the apiserver stores both for every node it
// accepts, so only a writer hiding its size leaves one out.
func (h *nodeMutator) clamp(node string, v reclaimable.Resources, capacity, allocatable map[string]string) reclaimable.Resources {
	if limit := nativeBound(capacity, allocatable, "cpu", true); v.CPUMilli > limit {
		h.reportClamp(node, ResourceCPU, v.CPUMilli, limit)
		v.CPUMilli = limit
	}
	if limit := nativeBound(capacity, allocatable, "memory", false); v.MemoryBytes > limit {
		h.reportClamp(node, ResourceMemory, v.MemoryBytes, limit)
		v.MemoryBytes = limit
	}
	return v
}

// nativeBound is min(allocatable[key], capacity[key]) in millicores (milli)
// or units, each absent, unparsable or negative value counting as 0.
func nativeBound(capacity, allocatable map[string]string, key string, milli bool) int64 {
	bound := func(m map[string]string) int64 {
		s, ok := m[key]
		if !ok {
			return 0
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return 0
		}
		if milli {
			return max(q.MilliValue(), 0)
		}
		return max(q.Value(), 0)
	}
	return min(bound(capacity), bound(allocatable))
}

// reportClamp counts every clamp and logs it once per node, resource and
// pair of values, since the same annotation comes back on every heartbeat.
func (h *nodeMutator) reportClamp(node, res string, annotated, native int64) {
	h.metrics.clamped.WithLabelValues(res).Inc()
	if h.logOnce(node, "clamp", res, strconv.FormatInt(annotated, 10)+">"+strconv.FormatInt(native, 10)) {
		logrus.WithFields(logrus.Fields{"node": truncated(node), "resource": res, "value": annotated, "nativeBound": native}).
			Warn("reclaimed value above the node's native size (min of allocatable and capacity); clamped")
	}
}

// quantityIs reports whether m[key] holds the integer want (spelled wantStr
// in canonical form); any spelling of the same quantity counts as equal.
func quantityIs(m map[string]string, key string, want int64, wantStr string) bool {
	cur, ok := m[key]
	if !ok {
		return false
	}
	if cur == wantStr {
		return true
	}
	q, err := resource.ParseQuantity(cur)
	return err == nil && q.CmpInt64(want) == 0
}

func (h *nodeMutator) reportOversellProblems(node string, ov *oversellChange) {
	if ov.badRecord != nil {
		h.metrics.errors.WithLabelValues(ErrInvalidOversellRec).Inc()
		logrus.WithFields(logrus.Fields{"node": truncated(node), "annotation": OversellRecordAnnotation(h.names), logrus.ErrorKey: truncated(ov.badRecord.Error())}).
			Warn("oversell record annotation is not valid; treating the current allocatable as raw")
	}
	for _, inv := range ov.invalid {
		h.metrics.errors.WithLabelValues(ErrInvalidOversellRatio).Inc()
		if h.logOnce(node, inv.where, inv.key, inv.value) { // log once per node, place and value
			logrus.WithFields(logrus.Fields{"node": truncated(node), inv.where: truncated(inv.key), "value": truncated(inv.value), logrus.ErrorKey: truncated(inv.err.Error())}).
				Warn("ignoring invalid oversell ratio")
		}
	}
}
