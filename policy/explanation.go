package policy

// Explanation carries every term of the formula that produced a node's
// reclaimable values, so an operator can see why a number is what it is
// (kubectl reclaim explain renders it). It is stored inside the node
// annotation, so keep it small.
type Explanation struct {
	CPU    ResourceExplanation `json:"cpu"`
	Memory ResourceExplanation `json:"memory"`
}

// ResourceExplanation is the ordered list of terms for one resource, and the
// result they add up to.
type ResourceExplanation struct {
	// Terms in evaluation order. Each term's Value is in the resource's unit
	// (millicores or bytes).
	Terms []Term `json:"terms"`
	// Result is the published value (millicores or bytes).
	Result int64 `json:"result"`
}

// Term is one step of the formula.
type Term struct {
	// Name is a short stable identifier, for example "allocatable", "margin",
	// "regular-peak-usage", "unmeasured-requests", "cap", "minimum".
	Name string `json:"name"`
	// Value in millicores or bytes.
	Value int64 `json:"value"`
	// Note says in words what the term is, for example "p95 over 5m0s of 20 samples".
	Note string `json:"note,omitempty"`
	// Op says how the term applies to the running result (one of the Op
	// constants). Terms are applied in order, starting from zero.
	Op string `json:"op,omitempty"`
}

// How a Term applies to the running result.
const (
	// OpBase replaces the running result with Value (the first term).
	OpBase = "="
	// OpSubtract subtracts Value.
	OpSubtract = "-"
	// OpFloor raises the running result to at least Value (never negative).
	OpFloor = "max"
	// OpCap lowers the running result to at most Value.
	OpCap = "min"
	// OpMinimum replaces the running result by zero when it is below Value.
	OpMinimum = "minimum"
	// OpInfo does not change the result: the value is already part of
	// another term and is shown for information.
	OpInfo = "info"
)

// Term names, stable identifiers for kubectl reclaim explain.
const (
	TermAllocatable        = "allocatable"
	TermMargin             = "margin"
	TermRegularPeakUsage   = "regular-peak-usage"
	TermSystemUsage        = "system-usage"
	TermUnmeasuredRequests = "unmeasured-requests"
	TermRegularRequests    = "regular-requests"
	TermFloor              = "floor"
	TermCap                = "cap"
	TermMinimum            = "minimum"
	// The two zero reasons appear as a single OpBase term with value 0.
	TermNoSamples    = ZeroReasonNoSamples
	TermMetricsStale = ZeroReasonStale
	TermInvalid      = ZeroReasonInvalidSettings
)

// Evaluate applies the terms in order, starting from zero, and returns the
// result they produce. For an explanation produced by this package it equals
// Result; kubectl reclaim explain can use it to show the running value.
func (e ResourceExplanation) Evaluate() int64 {
	var v int64
	for _, t := range e.Terms {
		v = t.Apply(v)
	}
	return v
}

// Apply returns the running result after this term.
func (t Term) Apply(v int64) int64 {
	switch t.Op {
	case OpBase:
		return t.Value
	case OpSubtract:
		return v - t.Value
	case OpFloor:
		return max(v, t.Value)
	case OpCap:
		return min(v, t.Value)
	case OpMinimum:
		if v < t.Value {
			return 0
		}
	}
	return v
}
