package reclaimable

// The explanation lives here rather than next to the policy that fills it in
// because it is part of the annotation: the publisher writes it and kubectl
// reclaim decodes and re-evaluates it, so its shape is the same contract as
// the values beside it and must change with them. Decoding it in one typed
// step with the rest of the annotation also spares every reader a second
// decode and its error path (the alternative, a json.RawMessage here).
// The policy owns only the vocabulary: the term names it emits.

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
	// Name is a short stable identifier chosen by the policy, for example
	// "allocatable", "margin", "cap".
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

// Evaluate applies the terms in order, starting from zero, and returns the
// result they produce. For an explanation written by the publisher it equals
// Result; kubectl reclaim explain uses it to check the annotation.
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
