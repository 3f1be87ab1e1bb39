package webhook

import (
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
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// nodeStatus keeps resource values as the strings stored: a value is
// compared by quantity only where the webhook writes it, and a spelling it
// cannot parse must not make the whole review undecodable.
type nodeStatus struct {
	Capacity    map[string]string `json:"capacity"`
	Allocatable map[string]string `json:"allocatable"`
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

	invalidMu     sync.Mutex
	invalidLogged map[string]string // node/key -> value last logged as invalid

	judgeMu sync.RWMutex
	judged  map[string]judgeEntry // node name -> last annotation seen
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
		invalidLogged: map[string]string{},
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
	now := h.now()
	var annotations map[string]string
	if node.Metadata != nil {
		annotations = node.Metadata.Annotations
	}
	value, present := annotations[h.names.Annotation]
	f := h.judge(nodeName, value, present, now)
	if !f.Fresh {
		h.metrics.stale.WithLabelValues(f.Reason).Inc()
		if logrus.IsLevelEnabled(logrus.DebugLevel) {
			logrus.WithFields(logrus.Fields{"node": nodeName, "reason": f.Reason, "detail": f.Detail,
				"heldCPU": f.Held.CPUMilli, "heldMemory": f.Held.MemoryBytes}).Debug("no room; injecting what reclaimed pods held")
		}
	}

	var capacity, allocatable map[string]string
	if node.Status != nil {
		capacity, allocatable = node.Status.Capacity, node.Status.Allocatable
	}
	// The status value is the room (zero unless fresh) floored at what the
	// annotation says reclaimed pods held, so that kubelet, re-admitting
	// every pod when it restarts, rejects none of them; see
	// docs/design.md#two-numbers-per-node.
	want := h.clamp(nodeName, f.Values.Max(f.Held), allocatable)
	capP := mapPatch{path: "/status/capacity", current: capacity, escaped: h.escaped}
	allocP := mapPatch{path: "/status/allocatable", current: allocatable, escaped: h.escaped}
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
	reclaimedChanged := !capP.empty() || !allocP.empty()

	ov := computeOversell(h.names, node.Metadata, node.Status)
	annP := mapPatch{path: "/metadata/annotations", current: annotations, escaped: h.escaped}
	if ov != nil {
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
	}

	ops := make([]patchOp, 0, 6)
	if node.Status == nil {
		if !capP.empty() || !allocP.empty() {
			status := map[string]map[string]string{}
			if len(capP.set) > 0 {
				status["capacity"] = capP.set
			}
			if len(allocP.set) > 0 {
				status["allocatable"] = allocP.set
			}
			ops = append(ops, patchOp{Op: "add", Path: "/status", Value: status})
		}
	} else {
		ops = capP.ops(ops)
		ops = allocP.ops(ops)
	}
	if node.Metadata != nil {
		ops = annP.ops(ops)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	if reclaimedChanged {
		h.metrics.patchReclaimed.Inc()
	}
	if ov != nil {
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
	return ops, nil
}

// clamp lowers a value above the node's native allocatable in the same
// object to it. The annotation is only as trustworthy as whoever can write
// the node: a bug, a hand edit or a node annotating itself must not create
// capacity out of nothing. The incoming allocatable is what the writer sent
// (kubelet's raw value, or the stored one for partial writers, inflated on an
// oversold node). A native value that is absent or does not parse gives no
// bound: nothing is known to compare with.
func (h *nodeMutator) clamp(node string, v reclaimable.Resources, allocatable map[string]string) reclaimable.Resources {
	if s, ok := allocatable["cpu"]; ok && v.CPUMilli > 0 {
		if q, err := resource.ParseQuantity(s); err == nil && v.CPUMilli > q.MilliValue() {
			h.reportClamp(node, ResourceCPU, v.CPUMilli, max(q.MilliValue(), 0))
			v.CPUMilli = max(q.MilliValue(), 0)
		}
	}
	if s, ok := allocatable["memory"]; ok && v.MemoryBytes > 0 {
		if q, err := resource.ParseQuantity(s); err == nil && v.MemoryBytes > q.Value() {
			h.reportClamp(node, ResourceMemory, v.MemoryBytes, max(q.Value(), 0))
			v.MemoryBytes = max(q.Value(), 0)
		}
	}
	return v
}

// reportClamp counts every clamp and logs it once per node, resource and
// pair of values, since the same annotation comes back on every heartbeat.
func (h *nodeMutator) reportClamp(node, res string, annotated, native int64) {
	h.metrics.clamped.WithLabelValues(res).Inc()
	id := node + "\x00clamp\x00" + res
	value := strconv.FormatInt(annotated, 10) + ">" + strconv.FormatInt(native, 10)
	h.invalidMu.Lock()
	last, seen := h.invalidLogged[id]
	if !seen || last != value {
		h.invalidLogged[id] = value
	}
	h.invalidMu.Unlock()
	if !seen || last != value {
		logrus.WithFields(logrus.Fields{"node": node, "resource": res, "value": annotated, "nativeAllocatable": native}).
			Warn("reclaimed value above the node's native allocatable; clamped")
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
		logrus.WithError(ov.badRecord).WithFields(logrus.Fields{"node": node, "annotation": OversellRecordAnnotation(h.names)}).
			Warn("oversell record annotation is not valid; treating the current allocatable as raw")
	}
	for _, inv := range ov.invalid {
		h.metrics.errors.WithLabelValues(ErrInvalidOversellRatio).Inc()
		id := node + "\x00" + inv.where + "\x00" + inv.key
		h.invalidMu.Lock()
		last, seen := h.invalidLogged[id]
		if !seen || last != inv.value {
			h.invalidLogged[id] = inv.value
		}
		h.invalidMu.Unlock()
		if !seen || last != inv.value { // log once per node, place and value
			logrus.WithError(inv.err).WithFields(logrus.Fields{"node": node, inv.where: inv.key, "value": inv.value}).
				Warn("ignoring invalid oversell ratio")
		}
	}
}
