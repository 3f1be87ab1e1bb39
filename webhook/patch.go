package webhook

import "strings"

// patchOp is one RFC 6902 operation, marshalled by encoding/json. Value is a
// string, a map[string]string or nil (for remove, where it is left out).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// escapeKey escapes one JSON Pointer reference token (RFC 6901): "~" becomes
// "~0" and "/" becomes "~1", in that order.
func escapeKey(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return keyEscaper.Replace(key)
}

var keyEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// mapPatch collects the changes to one map[string]string of the object (for
// example /status/allocatable) and turns them into operations: one "add" per
// key when the map exists (add on an existing member replaces it), or a
// single "add" of the whole map when it is absent or null.
type mapPatch struct {
	path    string            // JSON Pointer of the map, already escaped
	current map[string]string // nil when absent or null
	escaped map[string]string // precomputed escapeKey results (may be nil)
	set     map[string]string
	remove  []string
}

// setValue records key=value; callers decide beforehand whether the current
// value differs (quantities compare by value, not by spelling).
func (m *mapPatch) setValue(key, value string) {
	if m.set == nil {
		m.set = make(map[string]string, 4)
	}
	m.set[key] = value
}

func (m *mapPatch) removeKey(key string) {
	if _, ok := m.current[key]; ok {
		m.remove = append(m.remove, key)
	}
}

func (m *mapPatch) empty() bool { return len(m.set) == 0 && len(m.remove) == 0 }

// ops appends the operations in a deterministic order (keys sorted).
func (m *mapPatch) ops(dst []patchOp) []patchOp {
	if m.empty() {
		return dst
	}
	if m.current == nil {
		if len(m.set) == 0 {
			return dst
		}
		whole := make(map[string]string, len(m.set))
		for k, v := range m.set {
			whole[k] = v
		}
		return append(dst, patchOp{Op: "add", Path: m.path, Value: whole})
	}
	for _, k := range sortedKeys(m.set) {
		dst = append(dst, patchOp{Op: "add", Path: m.path + "/" + m.escape(k), Value: m.set[k]})
	}
	for _, k := range m.remove {
		dst = append(dst, patchOp{Op: "remove", Path: m.path + "/" + m.escape(k)})
	}
	return dst
}

func (m *mapPatch) escape(k string) string {
	if e, ok := m.escaped[k]; ok {
		return e
	}
	return escapeKey(k)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Tiny maps (at most four keys): insertion sort avoids the sort package's
	// interface allocation on the hot path.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
