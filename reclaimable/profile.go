package reclaimable

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// ProfileRewrite is the value of the pod annotation Names.ProfileRewrite:
// for each container (init and sidecar containers included; names are
// unique within a pod) the native cpu/memory requests a profile turned into
// reclaimed requests, in millicores and bytes. For example
//
//	{"app":{"cpuMilli":500,"memoryBytes":1073741824}}
//
// JSON, so that kubectl reclaim and any script decode it with a library;
// per container, because that is what was rewritten and the pod total
// follows from the pod's reclaimed requests.
type ProfileRewrite map[string]Resources

// ParseProfileRewrite decodes the annotation value.
func ParseProfileRewrite(s string) (ProfileRewrite, error) {
	var r ProfileRewrite
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("annotation is not a profile rewrite record: %w", err)
	}
	return r, nil
}

// String encodes the annotation value (keys sorted).
func (r ProfileRewrite) String() string {
	b, err := json.Marshal(r)
	if err != nil { // cannot happen: strings and integers
		return "{}"
	}
	return string(b)
}

// Containers returns the container names, sorted.
func (r ProfileRewrite) Containers() []string { return slices.Sorted(maps.Keys(r)) }

// Total sums every container's rewritten amounts. For a pod with regular
// init containers this is more than its effective request (they run one at
// a time); it is what was moved, not what the pod holds.
func (r ProfileRewrite) Total() Resources {
	var t Resources
	for _, v := range r {
		t = t.Add(v)
	}
	return t
}
