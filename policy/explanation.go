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
}
