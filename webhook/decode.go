package webhook

import (
	"encoding/binary"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// A purpose-built JSON reader for the hot path. A review is ~33 KB of which
// the webhook needs a few hundred bytes (the request envelope, the node's
// labels, annotations, capacity and allocatable); encoding/json validates the
// whole body and then walks it again through its state machine, which costs
// about 200 µs per review. This reader walks the body once, skipping what it
// does not need at memory speed, and still rejects every body that is not
// valid JSON (RFC 8259: structure, strings, escapes, numbers, literals; like
// encoding/json it does not check UTF-8), so a malformed body is never
// patched. Object keys match exactly (case-sensitive), as in the apiserver's
// own decoder. Decoding fails on a known field of an unexpected type; the
// caller then answers allowed without a patch.

const maxDepth = 1000

type jsonError struct {
	off int
	msg string
}

func (e *jsonError) Error() string { return fmt.Sprintf("invalid JSON at offset %d: %s", e.off, e.msg) }

type reader struct {
	b     []byte
	i     int
	depth int
	keys  *wantedKeys
	// scratch holds unescaped strings; slices returned by str() alias it
	// until the next call.
	scratch []byte
}

func (r *reader) errf(format string, args ...any) error {
	return &jsonError{off: r.i, msg: fmt.Sprintf(format, args...)}
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

// peek skips whitespace and returns the next byte, 0 at the end.
func (r *reader) peek() byte {
	if r.i < len(r.b) && r.b[r.i] > ' ' {
		return r.b[r.i]
	}
	r.ws()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

func (r *reader) expect(c byte) error {
	if r.peek() != c {
		if r.i >= len(r.b) {
			return r.errf("unexpected end of input, expected %q", c)
		}
		return r.errf("expected %q, found %q", c, r.b[r.i])
	}
	r.i++
	return nil
}

// end checks that only whitespace remains.
func (r *reader) end() error {
	if r.peek() != 0 || r.i < len(r.b) {
		return r.errf("data after the top-level value")
	}
	return nil
}

// isNull consumes a null literal if one is next.
func (r *reader) isNull() (bool, error) {
	if r.peek() != 'n' {
		return false, nil
	}
	return true, r.literal("null")
}

func (r *reader) literal(lit string) error {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		return r.errf("invalid literal, expected %s", lit)
	}
	r.i += len(lit)
	return nil
}

// object reads an object, calling member for each key with the reader
// positioned at the value; member must consume the value.
func (r *reader) object(member func(key []byte) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	r.depth++
	if r.depth > maxDepth {
		return r.errf("nesting deeper than %d", maxDepth)
	}
	if r.peek() == '}' {
		r.i++
		r.depth--
		return nil
	}
	for {
		if r.peek() != '"' {
			return r.errf("expected an object key")
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return nil
		default:
			return r.errf("expected ',' or '}' after an object member")
		}
	}
}

// strSafe[c] is true for bytes that may appear unescaped in a JSON string
// and do not end or escape it.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanSafe returns the index of the first byte at or after i that is not
// strSafe (or len(b)). It tests eight bytes at a time: a word has no byte
// below 0x20, no '"' and no '\\' exactly when none of the three classic
// "has a byte less than / equal to" bit tricks fires.
func scanSafe(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (ones * '"')
		e := x ^ (ones * '\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(e-ones)&^e)&highs != 0 {
			break
		}
		i += 8
	}
	for i < len(b) && strSafe[b[i]] {
		i++
	}
	return i
}

// str reads a string. Without escapes the result aliases the input; with
// escapes it aliases r.scratch. Copy it (string(...)) to keep it.
func (r *reader) str() ([]byte, error) {
	if r.peek() != '"' {
		return nil, r.errf("expected a string")
	}
	r.i++
	start := r.i
	b := r.b
	i := scanSafe(b, r.i)
	if i < len(b) && b[i] == '"' {
		r.i = i + 1
		return b[start:i], nil
	}
	// Escapes (or an error): unescape into scratch.
	out := append(r.scratch[:0], b[start:i]...) //nolint:gocritic // reuses the scratch buffer on purpose
	for {
		if i >= len(b) {
			r.i = i
			return nil, r.errf("unterminated string")
		}
		c := b[i]
		switch {
		case c == '"':
			r.i = i + 1
			r.scratch = out
			return out, nil
		case c < 0x20:
			r.i = i
			return nil, r.errf("control character in string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		// Escape sequence.
		if i+1 >= len(b) {
			r.i = i
			return nil, r.errf("unterminated escape")
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
			i += 2
		case 'b':
			out, i = append(out, '\b'), i+2
		case 'f':
			out, i = append(out, '\f'), i+2
		case 'n':
			out, i = append(out, '\n'), i+2
		case 'r':
			out, i = append(out, '\r'), i+2
		case 't':
			out, i = append(out, '\t'), i+2
		case 'u':
			r1, ok := hex4(b, i+2)
			if !ok {
				r.i = i
				return nil, r.errf("invalid \\u escape")
			}
			i += 6
			ru := rune(r1)
			if utf16.IsSurrogate(ru) {
				// A valid pair decodes to one rune; anything else is U+FFFD,
				// as encoding/json does.
				ru = utf8.RuneError
				if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
					if r2, ok := hex4(b, i+2); ok {
						if dec := utf16.DecodeRune(rune(r1), rune(r2)); dec != utf8.RuneError {
							ru = dec
							i += 6
						}
					}
				}
			}
			out = utf8.AppendRune(out, ru)
		default:
			r.i = i
			return nil, r.errf("invalid escape \\%c", b[i+1])
		}
		// Copy the next run of plain bytes at once.
		j := scanSafe(b, i)
		out = append(out, b[i:j]...)
		i = j
	}
}

func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// skipString validates a string without unescaping it.
func (r *reader) skipString() error {
	r.i++ // opening quote, checked by the caller
	b := r.b
	i := r.i
	for {
		i = scanSafe(b, i)
		if i >= len(b) {
			r.i = i
			return r.errf("unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			r.i = i + 1
			return nil
		case c == '\\':
			if i+1 >= len(b) {
				r.i = i
				return r.errf("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b, i+2); !ok {
					r.i = i
					return r.errf("invalid \\u escape")
				}
				i += 6
			default:
				r.i = i
				return r.errf("invalid escape")
			}
		default:
			r.i = i
			return r.errf("control character in string")
		}
	}
}

// skip validates and skips one value. It is iterative (no recursion, no
// closures): stack holds the closing byte of every open container.
func (r *reader) skip() error {
	var stackBuf [32]byte
	stack := stackBuf[:0]
	for {
		switch c := r.peek(); {
		case c == '"':
			if err := r.skipString(); err != nil {
				return err
			}
		case c == '{' || c == '[':
			r.i++
			if r.depth+len(stack)+1 > maxDepth {
				return r.errf("nesting deeper than %d", maxDepth)
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			if r.peek() == closing { // empty: the value is complete
				r.i++
				break
			}
			stack = append(stack, closing)
			if c == '{' {
				if err := r.key(); err != nil {
					return err
				}
			}
			continue // the first element
		case c == 't':
			if err := r.literal("true"); err != nil {
				return err
			}
		case c == 'f':
			if err := r.literal("false"); err != nil {
				return err
			}
		case c == 'n':
			if err := r.literal("null"); err != nil {
				return err
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if err := r.number(); err != nil {
				return err
			}
		case c == 0 && r.i >= len(r.b):
			return r.errf("unexpected end of input")
		default:
			return r.errf("invalid character %q looking for a value", c)
		}
		// A value is complete: close containers until one has a next element.
		for {
			if len(stack) == 0 {
				return nil
			}
			top := stack[len(stack)-1]
			c := r.peek()
			if c == ',' {
				r.i++
				if top == '}' {
					if err := r.key(); err != nil {
						return err
					}
				}
				break
			}
			if c != top {
				return r.errf("expected ',' or %q after a value", top)
			}
			r.i++
			stack = stack[:len(stack)-1]
		}
	}
}

// key validates `"key":` in a skipped object.
func (r *reader) key() error {
	if r.peek() != '"' {
		return r.errf("expected an object key")
	}
	if err := r.skipString(); err != nil {
		return err
	}
	return r.expect(':')
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *reader) number() error {
	b, i := r.b, r.i
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		r.i = i
		return r.errf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			r.i = i
			return r.errf("invalid number: no digits after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			r.i = i
			return r.errf("invalid number: no digits in exponent")
		}
	}
	r.i = i
	return nil
}

// stringField reads a string or null (empty) into dst.
func (r *reader) stringField(dst *string) error {
	if null, err := r.isNull(); null || err != nil {
		return err
	}
	if r.peek() != '"' {
		return r.errf("expected a string (unexpected type)")
	}
	s, err := r.str()
	if err != nil {
		return err
	}
	*dst = intern(s)
	return nil
}

// intern returns the constant for the values every review repeats, so
// that decoding them allocates nothing.
func intern(b []byte) string {
	switch string(b) { // no allocation: the compiler compares in place
	case "":
		return ""
	case admissionV1:
		return admissionV1
	case admissionV1beta1:
		return admissionV1beta1
	case "AdmissionReview":
		return "AdmissionReview"
	case "v1":
		return "v1"
	case "Node":
		return "Node"
	case "nodes":
		return "nodes"
	case "status":
		return "status"
	case "UPDATE":
		return "UPDATE"
	case "CREATE":
		return "CREATE"
	}
	return string(b)
}

// keySet lists the keys of a string map the webhook reads; nil keeps all.
type keySet []string

// find returns the key as a string and whether it is wanted; a wanted key
// is returned as the constant from the set (no allocation).
func (k keySet) find(key []byte) (string, bool) {
	if k == nil {
		return string(key), true
	}
	for _, w := range k {
		if string(key) == w {
			return w, true
		}
	}
	return "", false
}

// wantedKeys are the only map entries decoded: copying every label,
// annotation and resource of a node into Go maps would cost more than
// everything else the webhook does. The other values are validated as
// strings and dropped.
type wantedKeys struct {
	labels, annotations, resources keySet
}

func newWantedKeys(n reclaimable.Names) *wantedKeys {
	return &wantedKeys{
		labels:      keySet{n.CPURatio, n.MemoryRatio},
		annotations: keySet{n.Annotation, n.CPURatio, n.MemoryRatio, OversellRecordAnnotation(n)},
		resources:   keySet{string(n.CPU), string(n.Memory), string(corev1.ResourceCPU), string(corev1.ResourceMemory)},
	}
}

// allKeys keeps every entry (tests and fuzzing compare with encoding/json).
var allKeys = &wantedKeys{}

// stringMap reads an object of strings, or null (nil map), keeping the keys
// in want. An object yields a non-nil map even when no key is kept, so that
// "absent" and "present" stay distinguishable.
//
// Like encoding/json, a repeated key adds to the map decoded before.
func (r *reader) stringMap(want keySet, m map[string]string) (map[string]string, error) {
	if null, err := r.isNull(); null || err != nil {
		return nil, err
	}
	if r.peek() != '{' {
		return nil, r.errf("expected an object of strings (unexpected type)")
	}
	if m == nil {
		m = make(map[string]string, len(want))
	}
	err := r.object(func(key []byte) error {
		k, wanted := want.find(key)
		if !wanted {
			if null, err := r.isNull(); null || err != nil {
				return err
			}
			if r.peek() != '"' {
				return r.errf("expected a string (unexpected type)")
			}
			return r.skipString()
		}
		var v string
		if err := r.stringField(&v); err != nil {
			return err
		}
		m[k] = v
		return nil
	})
	return m, err
}

// isObjectOrNull reports whether an object follows (false for null, which
// it consumes); any other type is an error.
func (r *reader) isObjectOrNull() (bool, error) {
	if null, err := r.isNull(); null || err != nil {
		return false, err
	}
	if r.peek() != '{' {
		return false, r.errf("expected an object (unexpected type)")
	}
	return true, nil
}

// decodeReview reads the parts of an AdmissionReview the webhook uses and
// validates the rest. On valid UTF-8 input that encoding/json decodes
// without error (case-sensitively) it yields the same result, repeated keys
// included (decode_test.go and FuzzDecodeReview check this).
func decodeReview(data []byte, rv *admissionReview, keys *wantedKeys) error {
	r := &reader{b: data, keys: keys}
	return r.review(rv)
}

// review is decodeReview on a reader whose scratch buffer may be reused.
func (r *reader) review(rv *admissionReview) error {
	if r.peek() != '{' {
		return r.errf("the body is not a JSON object")
	}
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "apiVersion":
			return r.stringField(&rv.APIVersion)
		case "kind":
			return r.stringField(&rv.Kind)
		case "request":
			ok, err := r.isObjectOrNull()
			if !ok || err != nil {
				rv.Request = nil
				return err
			}
			if rv.Request == nil {
				rv.Request = &admissionRequest{}
			}
			return r.request(rv.Request)
		}
		return r.skip()
	})
	if err != nil {
		return err
	}
	return r.end()
}

func (r *reader) request(req *admissionRequest) error {
	return r.object(func(key []byte) error {
		switch string(key) {
		case "uid":
			return r.stringField(&req.UID)
		case "kind":
			return r.gvk(&req.Kind)
		case "resource":
			return r.gvr(&req.Resource)
		case "subResource":
			return r.stringField(&req.SubResource)
		case "name":
			return r.stringField(&req.Name)
		case "operation":
			return r.stringField(&req.Operation)
		case "object":
			ok, err := r.isObjectOrNull()
			if !ok || err != nil {
				req.Object = nil
				return err
			}
			if req.Object == nil {
				req.Object = &nodeObject{}
			}
			return r.node(req.Object)
		}
		return r.skip()
	})
}

func (r *reader) gvk(dst *gvk) error {
	if ok, err := r.isObjectOrNull(); !ok || err != nil {
		return err
	}
	return r.object(func(key []byte) error {
		switch string(key) {
		case "group":
			return r.stringField(&dst.Group)
		case "version":
			return r.stringField(&dst.Version)
		case "kind":
			return r.stringField(&dst.Kind)
		}
		return r.skip()
	})
}

func (r *reader) gvr(dst *gvr) error {
	if ok, err := r.isObjectOrNull(); !ok || err != nil {
		return err
	}
	return r.object(func(key []byte) error {
		switch string(key) {
		case "group":
			return r.stringField(&dst.Group)
		case "version":
			return r.stringField(&dst.Version)
		case "resource":
			return r.stringField(&dst.Resource)
		}
		return r.skip()
	})
}

func (r *reader) node(n *nodeObject) error {
	return r.object(func(key []byte) error {
		switch string(key) {
		case "apiVersion":
			return r.stringField(&n.APIVersion)
		case "kind":
			return r.stringField(&n.Kind)
		case "metadata":
			ok, err := r.isObjectOrNull()
			if !ok || err != nil {
				n.Metadata = nil
				return err
			}
			if n.Metadata == nil {
				n.Metadata = &nodeMeta{}
			}
			return r.meta(n.Metadata)
		case "status":
			ok, err := r.isObjectOrNull()
			if !ok || err != nil {
				n.Status = nil
				return err
			}
			if n.Status == nil {
				n.Status = &nodeStatus{}
			}
			return r.status(n.Status)
		}
		return r.skip()
	})
}

func (r *reader) meta(m *nodeMeta) error {
	return r.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "name":
			return r.stringField(&m.Name)
		case "labels":
			m.Labels, err = r.stringMap(r.keys.labels, m.Labels)
			return err
		case "annotations":
			m.Annotations, err = r.stringMap(r.keys.annotations, m.Annotations)
			return err
		}
		return r.skip()
	})
}

func (r *reader) status(s *nodeStatus) error {
	return r.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "capacity":
			s.Capacity, err = r.stringMap(r.keys.resources, s.Capacity)
			return err
		case "allocatable":
			s.Allocatable, err = r.stringMap(r.keys.resources, s.Allocatable)
			return err
		}
		return r.skip()
	})
}
