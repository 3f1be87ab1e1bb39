package extender

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// The filter and prioritize calls carry one pod and up to thousands of node
// names, and the answer repeats the names. encoding/json scans every byte
// twice through its state machine and allocates a string per name, and the
// garbage makes the GC mark the informers' 150,000 pod records again and
// again, which shows in the p99. This file reads and writes that wire format
// (the field names of k8s.io/kube-scheduler/extender/v1, which has no json
// tags) in one pass:
//   - the top-level object is walked by hand; the node names become strings
//     that point into the request body (no copy), the pod is decoded by
//     encoding/json into a struct holding only what PodRequest reads;
//   - the answer is appended straight into a pooled buffer.
// Anything the fast reader is not sure about (escapes or non-ASCII in a name,
// full Nodes, invalid JSON) falls back to encoding/json with the upstream
// types, which also produces the error messages. Tests check both paths agree.

// errSlowPath sends a request to the encoding/json reader.
var errSlowPath = errors.New("needs the standard decoder")

// wireArgs is ExtenderArgs as the verbs need it.
type wireArgs struct {
	pod   *corev1.Pod
	names []string
	// nodesGiven: the scheduler sent full Nodes (not nodeCacheCapable).
	nodesGiven bool
	// plain: every name is printable ASCII without '"' or '\\', so it can be
	// written back without escaping.
	plain bool
}

// wirePod holds the parts of a Pod that PodRequest reads.
type wirePod struct {
	Metadata struct {
		Name      string    `json:"name"`
		Namespace string    `json:"namespace"`
		UID       types.UID `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		Containers     []wireContainer     `json:"containers"`
		InitContainers []wireContainer     `json:"initContainers"`
		Overhead       corev1.ResourceList `json:"overhead"`
	} `json:"spec"`
}

type wireContainer struct {
	Name          string                         `json:"name"`
	Resources     corev1.ResourceRequirements    `json:"resources"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
}

func (w *wirePod) pod() *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Namespace, p.UID = w.Metadata.Name, w.Metadata.Namespace, w.Metadata.UID
	conv := func(in []wireContainer) []corev1.Container {
		out := make([]corev1.Container, len(in))
		for i := range in {
			out[i] = corev1.Container{Name: in[i].Name, Resources: in[i].Resources, RestartPolicy: in[i].RestartPolicy}
		}
		return out
	}
	p.Spec.Containers = conv(w.Spec.Containers)
	p.Spec.InitContainers = conv(w.Spec.InitContainers)
	p.Spec.Overhead = w.Spec.Overhead
	return p
}

// parseArgs reads an ExtenderArgs body. The returned names may point into
// body: body must not change while they are in use.
func parseArgs(body []byte, names []string) (wireArgs, error) {
	a, err := fastParseArgs(body, names)
	if err == nil {
		return a, nil
	}
	var args extenderv1.ExtenderArgs
	if err := json.Unmarshal(body, &args); err != nil {
		return wireArgs{}, err
	}
	a = wireArgs{pod: args.Pod, nodesGiven: args.NodeNames == nil && args.Nodes != nil && len(args.Nodes.Items) > 0}
	if args.NodeNames != nil {
		a.names = *args.NodeNames
	}
	return a, nil
}

func fastParseArgs(body []byte, names []string) (wireArgs, error) {
	var a wireArgs
	r := reader{b: body}
	r.ws()
	if !r.eat('{') {
		return a, errSlowPath
	}
	var podRaw []byte
	seen := 0
	for {
		r.ws()
		if seen == 0 && r.eat('}') {
			break
		}
		key, ok := r.plainString()
		if !ok {
			return a, errSlowPath
		}
		r.ws()
		if !r.eat(':') {
			return a, errSlowPath
		}
		r.ws()
		// encoding/json matches field names case-insensitively; so do we
		// for the three fields, and leave anything else to it.
		switch {
		case equalFold(key, "NodeNames"):
			if r.literal("null") {
				names = names[:0]
				break
			}
			if names, ok = r.stringArray(names[:0]); !ok {
				return a, errSlowPath
			}
			a.names = names
		case equalFold(key, "Pod"):
			if podRaw != nil {
				// encoding/json would merge both into one Pod.
				return a, errSlowPath
			}
			start := r.i
			if !r.skipValue() {
				return a, errSlowPath
			}
			podRaw = body[start:r.i]
		case equalFold(key, "Nodes"):
			if !r.literal("null") {
				return a, errSlowPath // rare: let encoding/json look at it
			}
		default:
			return a, errSlowPath
		}
		seen++
		r.ws()
		if r.eat(',') {
			continue
		}
		if r.eat('}') {
			break
		}
		return a, errSlowPath
	}
	r.ws()
	if r.i != len(body) || podRaw == nil {
		return a, errSlowPath
	}
	if string(podRaw) != "null" {
		var wp wirePod
		if err := json.Unmarshal(podRaw, &wp); err != nil {
			return a, errSlowPath
		}
		a.pod = wp.pod()
	}
	a.plain = true
	return a, nil
}

// reader walks JSON bytes.
type reader struct {
	b []byte
	i int
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) eat(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *reader) literal(s string) bool {
	if len(r.b)-r.i >= len(s) && string(r.b[r.i:r.i+len(s)]) == s {
		r.i += len(s)
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes and returns
// it as a view into the buffer; anything else is not for the fast path.
func (r *reader) plainString() (string, bool) {
	if !r.eat('"') {
		return "", false
	}
	n := plainPrefix(r.b[r.i:])
	start := r.i
	r.i += n
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", false // an escape, a control or non-ASCII byte, or the end
	}
	s := r.b[start:r.i]
	r.i++
	return unsafe.String(unsafe.SliceData(s), len(s)), true
}

// plainPrefix returns the length of the longest prefix of b made of
// printable ASCII other than '"' and '\\', eight bytes at a time.
func plainPrefix(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// A byte is special when >= 0x80, < 0x20, '"' or '\\' (the classic
		// "has zero byte" tests on x, x-0x20 and x^'"'/x^'\\').
		q := x ^ (ones * '"')
		bs := x ^ (ones * '\\')
		special := (x | (x - ones*0x20) | ((q - ones) &^ q) | ((bs - ones) &^ bs)) & highs
		if special != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

func (r *reader) stringArray(out []string) ([]string, bool) {
	if !r.eat('[') {
		return out, false
	}
	r.ws()
	if r.eat(']') {
		return out, true
	}
	for {
		r.ws()
		s, ok := r.plainString()
		if !ok {
			return out, false
		}
		out = append(out, s)
		r.ws()
		if r.eat(',') {
			continue
		}
		return out, r.eat(']')
	}
}

// skipValue moves past one JSON value. It checks structure only; the one
// value skipped, the pod, is then decoded (and validated) by encoding/json.
func (r *reader) skipValue() bool {
	if r.i >= len(r.b) {
		return false
	}
	switch r.b[r.i] {
	case '"':
		return r.skipString()
	case '{', '[':
		depth := 0
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case '"':
				if !r.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					r.i++
					return true
				}
			}
			r.i++
		}
		return false
	default: // number, true, false, null: up to the next delimiter
		start := r.i
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return r.i > start
			}
			r.i++
		}
		return r.i > start
	}
}

func (r *reader) skipString() bool {
	r.i++ // the opening quote
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '\\':
			r.i += 2
			continue
		case '"':
			r.i++
			return true
		}
		r.i++
	}
	return false
}

func equalFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if a|0x20 != b|0x20 {
			return false
		}
	}
	return true
}

// appendString appends s as a JSON string, escaped as encoding/json does
// (except U+2028/U+2029, which JSON does not require).
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		// Only names from the standard decoder can get here; it already
		// replaced invalid bytes, so this is defensive.
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendName appends a node name as a JSON string; plain names (see
// wireArgs.plain) need no escaping.
func appendName(b []byte, s string, plain bool) []byte {
	if !plain {
		return appendString(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
