package webhook

import (
	"encoding/json"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Native oversell (opt-in per node)
//
// A node labelled node-restriction.kubernetes.io/<domain>-oversell-cpu-ratio
// and/or node-restriction.kubernetes.io/<domain>-oversell-memory-ratio
// (Names.CPURatio, Names.MemoryRatio; a decimal in (1, 10], for example
// "1.5") gets its native status.allocatable cpu/memory multiplied by the
// ratio on every status write, capped at status.capacity × ratio. Only that
// label counts: the NodeRestriction admission plugin keeps a kubelet from
// setting labels under node-restriction.kubernetes.io/ on its own Node,
// whereas it may set its other labels and any annotation, so a node could
// otherwise opt itself in. An invalid value is ignored (logged once per node
// and value, counted in
// kube_reclaim_webhook_errors_total{kind="invalid-oversell-ratio"}).
// --oversell=false ignores every ratio: nodes inflated before get their raw
// allocatable back on their next status write.
//
// Writers and compounding. Every nodes/status write goes through the webhook,
// but writers differ in what the incoming object carries:
//   - kubelet sends its own computed allocatable (capacity − reservations), the
//     raw value;
//   - kwok's conditions-only heartbeat, the publisher's extended-resource patch
//     and any other partial writer leave allocatable alone, so the incoming
//     object carries the stored, already inflated value;
//   - a reinvocation (reinvocationPolicy IfNeeded) carries our own patch.
//
// Multiplying whatever arrives would compound on every partial write. So the
// webhook records, in the node annotation <domain>/oversell-raw (JSON, see
// OversellRecord) written in the same patch, the raw value, the ratio, the
// capacity and the value it applied. On the next write: an incoming
// allocatable equal to the recorded applied value (and an unchanged capacity)
// is ours, so raw = the recorded raw; anything else is a fresh raw value from
// kubelet (or from whoever set it) and becomes the new raw. The apiserver keeps
// metadata changes made through nodes/status (its status strategy resets only
// spec), so the record lands atomically with the value it describes. Removing
// the ratio restores the recorded raw value on the next status write and
// removes the record.
//
// Cost. kubelet recomputes allocatable on every status computation
// (nodeStatusUpdateFrequency, 10 s by default), sees that its value differs
// from the stored inflated one and therefore PATCHes nodes/status every
// nodeStatusUpdateFrequency instead of every nodeStatusReportFrequency
// (5 min by default): about 30 times more status writes for each
// opted-in node, each one re-inflated by the webhook. Nodes without a ratio
// pay nothing.
//
// Limits. If kubelet's fresh raw value happens to equal the value the webhook
// last applied while capacity is unchanged, it is taken for ours and the old
// raw value is kept. If the record annotation is deleted by hand while
// allocatable is inflated, the inflated value is taken as raw once (bounded by
// the capacity × ratio cap) until kubelet next sends its raw value.

// OversellRecordAnnotation is the node annotation in which the webhook records
// the raw allocatable values it inflated.
func OversellRecordAnnotation(n reclaimable.Names) string { return n.Domain + "/oversell-raw" }

// OversellRecord is the JSON value of OversellRecordAnnotation.
type OversellRecord struct {
	CPU    *OversellEntry `json:"cpu,omitempty"`
	Memory *OversellEntry `json:"memory,omitempty"`
}

// OversellEntry describes one inflated resource.
type OversellEntry struct {
	// Ratio is the ratio applied, as written on the node.
	Ratio string `json:"ratio"`
	// Raw is the allocatable value kubelet (or the creator) last wrote.
	Raw resource.Quantity `json:"raw"`
	// Capacity is status.capacity when the entry was written, if present.
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// Applied is the value the webhook wrote into status.allocatable.
	Applied resource.Quantity `json:"applied"`
}

// ParseOversellRecord decodes an OversellRecordAnnotation value.
func ParseOversellRecord(value string) (OversellRecord, error) {
	var r OversellRecord
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return OversellRecord{}, err
	}
	return r, nil
}

// Ratio bounds: a ratio must be above MinOversellRatio and at most MaxOversellRatio.
const (
	MinOversellRatio = 1
	MaxOversellRatio = 10
)

var (
	ratioMin = big.NewRat(MinOversellRatio, 1)
	ratioMax = big.NewRat(MaxOversellRatio, 1)
)

// parseRatio accepts a plain decimal ("1.5", "2") in (1, 10].
func parseRatio(s string) (*big.Rat, error) {
	if s == "" || len(s) > 16 {
		// Not quoted whole: a forged value may be any size.
		return nil, fmt.Errorf("%q is not a decimal ratio", truncated(s))
	}
	dot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return nil, fmt.Errorf("%q is not a decimal ratio", s)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal ratio", s)
	}
	if r.Cmp(ratioMin) <= 0 || r.Cmp(ratioMax) > 0 {
		return nil, fmt.Errorf("ratio %s is outside (%d, %d]", s, MinOversellRatio, MaxOversellRatio)
	}
	return r, nil
}

// scale returns floor(v × r), false when it does not fit an int64.
func scale(v int64, r *big.Rat) (int64, bool) {
	n := new(big.Int).Mul(big.NewInt(v), r.Num())
	n.Quo(n, r.Denom())
	if !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

// oversellResource describes how one native resource is measured.
type oversellResource struct {
	name   corev1.ResourceName
	milli  bool // cpu: compare and scale millicores; memory: bytes
	format resource.Format
}

var (
	oversellCPU    = oversellResource{name: corev1.ResourceCPU, milli: true, format: resource.DecimalSI}
	oversellMemory = oversellResource{name: corev1.ResourceMemory, format: resource.BinarySI}
)

func (o oversellResource) value(q resource.Quantity) int64 {
	if o.milli {
		return q.MilliValue()
	}
	return q.Value()
}

func (o oversellResource) quantity(v int64) resource.Quantity {
	if o.milli {
		return *resource.NewMilliQuantity(v, o.format)
	}
	return *resource.NewQuantity(v, o.format)
}

// invalidRatio describes a ratio that was ignored.
type invalidRatio struct {
	key, where, value string
	err               error
}

// oversellChange is what oversell decided for one node.
type oversellChange struct {
	allocatable map[string]string // native resource -> new allocatable value
	applied     bool              // some value was inflated
	restored    bool              // some raw value was restored
	record      *string           // new annotation value; nil: leave as is
	removeRec   bool              // remove the annotation
	invalid     []invalidRatio
	badRecord   error
}

// findRatio returns the ratio the label key gives, nil when it is absent,
// empty or invalid.
func findRatio(key string, labels map[string]string, invalid *[]invalidRatio) (*big.Rat, string) {
	value := labels[key]
	if value == "" {
		return nil, ""
	}
	r, err := parseRatio(value)
	if err != nil {
		*invalid = append(*invalid, invalidRatio{key: key, where: "label", value: value, err: err})
		return nil, ""
	}
	return r, value
}

// computeOversell applies the rule described above to one node. It returns
// nil when the node neither opts in (or enabled is false) nor carries a
// record.
func computeOversell(names reclaimable.Names, meta *nodeMeta, status *nodeStatus, enabled bool) *oversellChange {
	if meta == nil {
		return nil
	}
	recKey := OversellRecordAnnotation(names)
	recValue, hasRec := meta.Annotations[recKey]
	_, cpuL := meta.Labels[names.CPURatio]
	_, memL := meta.Labels[names.MemoryRatio]
	optsIn := enabled && (cpuL || memL)
	if !hasRec && !optsIn {
		return nil
	}
	ch := &oversellChange{}
	var rec OversellRecord
	if hasRec {
		var err error
		if rec, err = ParseOversellRecord(recValue); err != nil {
			ch.badRecord = err
			rec = OversellRecord{}
		}
	}
	var capacity, allocatable map[string]string
	if status != nil {
		capacity, allocatable = status.Capacity, status.Allocatable
	}
	var next OversellRecord
	var cpuRatio, memRatio *big.Rat
	var cpuRatioStr, memRatioStr string
	if enabled {
		cpuRatio, cpuRatioStr = findRatio(names.CPURatio, meta.Labels, &ch.invalid)
		memRatio, memRatioStr = findRatio(names.MemoryRatio, meta.Labels, &ch.invalid)
	}
	next.CPU = ch.one(oversellCPU, rec.CPU, cpuRatio, cpuRatioStr, capacity, allocatable)
	next.Memory = ch.one(oversellMemory, rec.Memory, memRatio, memRatioStr, capacity, allocatable)

	if next.CPU == nil && next.Memory == nil {
		if hasRec {
			ch.removeRec = true
		}
	} else {
		b, err := json.Marshal(next)
		if err == nil && (!hasRec || string(b) != recValue) {
			s := string(b)
			ch.record = &s
		}
	}
	if len(ch.allocatable) == 0 && ch.record == nil && !ch.removeRec && len(ch.invalid) == 0 && ch.badRecord == nil {
		return nil
	}
	return ch
}

// one decides one resource and returns the entry to record (nil: none).
func (ch *oversellChange) one(res oversellResource, entry *OversellEntry, ratio *big.Rat, ratioStr string, capacity, allocatable map[string]string) *OversellEntry {
	inStr, ok := allocatable[string(res.name)]
	if !ok {
		// Nothing to base a value on; keep whatever was recorded.
		if ratio == nil {
			return nil
		}
		return entry
	}
	in, err := resource.ParseQuantity(inStr)
	if err != nil || in.Sign() < 0 {
		return entry
	}
	var capQ *resource.Quantity
	if s, ok := capacity[string(res.name)]; ok {
		if q, err := resource.ParseQuantity(s); err == nil && q.Sign() >= 0 {
			capQ = &q
		}
	}
	ours := entry != nil && in.Cmp(entry.Applied) == 0 &&
		(entry.Capacity == nil || capQ == nil || entry.Capacity.Cmp(*capQ) == 0)
	raw := in
	if ours {
		raw = entry.Raw
	}
	if ratio == nil {
		if ours && in.Cmp(raw) != 0 {
			ch.set(res, raw.String())
			ch.restored = true
		}
		return nil
	}
	target, ok := scale(res.value(raw), ratio)
	if !ok {
		return entry
	}
	if capQ != nil {
		if limit, ok := scale(res.value(*capQ), ratio); ok && target > limit {
			target = limit
		}
	}
	applied := res.quantity(target)
	if in.Cmp(applied) != 0 {
		ch.set(res, applied.String())
		ch.applied = true
	}
	return &OversellEntry{Ratio: ratioStr, Raw: raw, Capacity: capQ, Applied: applied}
}

func (ch *oversellChange) set(res oversellResource, value string) {
	if ch.allocatable == nil {
		ch.allocatable = make(map[string]string, 2)
	}
	ch.allocatable[string(res.name)] = value
}
