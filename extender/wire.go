package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// The JSON of the extender verbs: json-iterator, configured as encoding/json
// behaves, with two changes on the path of every scheduling attempt, where a
// call carries up to thousands of node names.
//
//   - Decoding: ExtenderArgs.NodeNames is read by nodeNamesDecoder, which
//     looks each name up in the node cache once: it hands out the cache's
//     own copy of a known name instead of a new string per name and call
//     (the scheduler sends the same names on every call), and keeps the
//     node's cache entry for the verb, which then needs no second lookup.
//   - Decoding: ExtenderArgs.Pod is read by podDecoder, which answers for
//     the informer's record of the pod when the body names the very
//     object the informer holds, instead of decoding the whole pod.
//   - Encoding: map keys (FailedNodes) are not sorted, and <, > and & are
//     not escaped. kube-scheduler reads the answer into a map, so the order
//     carries nothing, and sorting thousands of keys was most of an answer's
//     cost; the HTML escapes only matter for JSON pasted into HTML.

// argsConfig is json-iterator's encoding/json-compatible configuration.
var argsConfig = jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true}

// answerJSON encodes the answers.
var answerJSON = jsoniter.Config{ValidateJsonRawMessage: true}.Froze()

// plainArgsJSON decodes ExtenderArgs without a cache to intern names from
// and without pod records (parseArgs, the fuzz target's entry).
var plainArgsJSON = newArgsJSON(nil, nil)

// newArgsJSON returns a decoder of ExtenderArgs whose NodeNames are interned
// from c's node names (none when c is nil) and whose Pod is answered from
// pods' records when it can be (never when pods is nil). Each server has
// its own: the decoder is bound to its cache and informer.
func newArgsJSON(c *nodeCache, pods podSource) jsoniter.API {
	api := argsConfig.Froze()
	api.RegisterExtension(&argsExtension{names: &nodeNamesDecoder{cache: c}, pods: pods, api: api})
	return api
}

var argsType = reflect.TypeFor[extenderv1.ExtenderArgs]()

// argsExtension puts nodeNamesDecoder on ExtenderArgs.NodeNames and
// podDecoder on ExtenderArgs.Pod.
type argsExtension struct {
	jsoniter.DummyExtension
	names *nodeNamesDecoder
	pods  podSource
	api   jsoniter.API
}

func (e *argsExtension) UpdateStructDescriptor(sd *jsoniter.StructDescriptor) {
	if sd.Type.Type1() != argsType {
		return
	}
	if b := sd.GetField("NodeNames"); b != nil {
		b.Decoder = e.names
	}
	if b := sd.GetField("Pod"); b != nil && e.pods != nil {
		b.Decoder = &podDecoder{full: b.Decoder, pods: e.pods, api: e.api}
	}
}

// podDecoder decodes ExtenderArgs.Pod (a *corev1.Pod field). kube-scheduler
// sends the whole pod, managedFields included, on every filter call, and
// decoding it was the largest part of the verbs' own work, while the verbs
// read nothing of it that the pod informer's record does not hold already.
// So when the body's pod names, by namespace, name, UID and
// resourceVersion, the object the informer holds, the call is answered for
// that record (request.rec) and the rest of the pod is skipped: one
// resourceVersion is one stored object, so what the body says beyond its
// metadata is what the record was made from. Any other pod (one the
// informer has not seen yet, another version, metadata written in a way
// podMeta does not read) is decoded in full, as it always was.
//
// The iterator's Attachment must be the call's *request; without one the
// pod is decoded in full.
type podDecoder struct {
	full jsoniter.ValDecoder
	pods podSource
	api  jsoniter.API
}

func (d *podDecoder) Decode(ptr unsafe.Pointer, iter *jsoniter.Iterator) {
	rq, _ := iter.Attachment.(*request)
	switch {
	case rq != nil && rq.rec != nil:
		// A second Pod after one answered from its record: encoding/json
		// would merge the two, which only a full decode can do.
		iter.ReportError("decode Pod", "Pod repeated")
		return
	case rq == nil || *(**corev1.Pod)(ptr) != nil || iter.WhatIsNext() != jsoniter.ObjectValue:
		d.full.Decode(ptr, iter)
		return
	}
	if rq.podRaw == nil {
		rq.podRaw = make([]byte, 0, 4<<10) // json-iterator captures only into a non-nil slice
	}
	rq.podRaw = iter.SkipAndAppendBytes(rq.podRaw[:0])
	if iter.Error != nil {
		return
	}
	if rec := d.stored(rq.podRaw); rec != nil {
		rq.rec = rec
		return
	}
	sub := d.api.BorrowIterator(rq.podRaw)
	defer d.api.ReturnIterator(sub)
	d.full.Decode(ptr, sub)
	if sub.Error != nil && !errors.Is(sub.Error, io.EOF) {
		iter.ReportError("decode Pod", sub.Error.Error())
	}
}

// stored returns the informer's record of the pod in raw when raw's
// metadata names it exactly, nil otherwise.
func (d *podDecoder) stored(raw []byte) *podRecord {
	iter := d.api.BorrowIterator(raw)
	defer d.api.ReturnIterator(iter)
	m, ok := readPodMeta(iter)
	if !ok || m.uid == "" || m.resourceVersion == "" {
		return nil
	}
	rec, found := d.pods.pod(m.namespace, m.name)
	if !found || string(rec.uid) != m.uid || rec.resourceVersion != m.resourceVersion {
		return nil
	}
	return rec
}

// podMeta is what podDecoder compares with a record.
type podMeta struct {
	namespace, name, uid, resourceVersion string
}

// readPodMeta reads metadata.namespace, name, uid and resourceVersion of
// the pod object at iter, skipping everything else. ok is false when the
// object holds a key that encoding/json would match to one of these (or
// to metadata) but is not written exactly so (other case, non-ASCII
// letters that fold to ASCII), or a value that is not a string: such a pod
// is decoded in full, and encoding/json's reading decides.
func readPodMeta(iter *jsoniter.Iterator) (m podMeta, ok bool) {
	ok = true
	iter.ReadObjectCB(func(iter *jsoniter.Iterator, key string) bool {
		switch exactKey(key, "metadata") {
		case keyOther:
			iter.Skip()
			return true
		case keyAmbiguous:
			ok = false
			return false
		}
		return iter.ReadObjectCB(func(iter *jsoniter.Iterator, key string) bool {
			var dst *string
			for _, f := range [...]struct {
				name string
				dst  *string
			}{{"namespace", &m.namespace}, {"name", &m.name}, {"uid", &m.uid}, {"resourceVersion", &m.resourceVersion}} {
				switch exactKey(key, f.name) {
				case keyExact:
					dst = f.dst
				case keyAmbiguous:
					ok = false
					return false
				}
			}
			if dst == nil {
				iter.Skip()
				return true
			}
			if iter.WhatIsNext() != jsoniter.StringValue {
				ok = false
				return false
			}
			*dst = iter.ReadString()
			return true
		})
	})
	return m, ok && iter.Error == nil
}

type keyMatch uint8

const (
	keyOther keyMatch = iota
	keyExact
	keyAmbiguous
)

// exactKey tells whether key is want exactly, another key, or one that
// encoding/json's case-insensitive matching may take for want: the same
// letters in another case, or any key with a non-ASCII byte (encoding/json
// folds some, such as U+017F to s and U+212A to k).
func exactKey(key, want string) keyMatch {
	switch {
	case key == want:
		return keyExact
	case strings.EqualFold(key, want):
		return keyAmbiguous
	}
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return keyAmbiguous
		}
	}
	return keyOther
}

// nodeNamesDecoder decodes a JSON array of strings (or null) into a
// *[]string field. Names are taken in place from the body and looked up in
// the cache (see nameSink): a name the cache does not know is counted, not
// kept. When the iterator's Attachment is a *request, the entry of each
// kept name is appended to its entries, in order, and the unknown names
// are counted in its unknown. A name with an escape sequence or a control
// character is refused, which sends the whole body to encoding/json (see
// decodeArgs): node names never contain them, and encoding/json then
// decides exactly as kube-scheduler's encoder meant.
//
// When the field already points to a slice, its backing array is reused;
// the field is always given a new pointer, so the caller can tell a present
// field from an absent one.
type nodeNamesDecoder struct {
	cache *nodeCache
}

func (d *nodeNamesDecoder) Decode(ptr unsafe.Pointer, iter *jsoniter.Iterator) {
	field := (**[]string)(ptr)
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.ReadNil()
		*field = nil
		return
	case jsoniter.ArrayValue:
	default:
		iter.ReportError("decode NodeNames", "expects an array of strings or null")
		return
	}
	rq, _ := iter.Attachment.(*request)
	sink := newNameSink(d.cache, *field, rq)
	if d.cache != nil {
		d.cache.mu.RLock()
		defer d.cache.mu.RUnlock()
	}
	for iter.ReadArray() {
		if iter.WhatIsNext() != jsoniter.StringValue {
			iter.ReportError("decode NodeNames", "expects a string")
			return
		}
		b := iter.ReadStringAsSlice()
		if iter.Error != nil {
			return
		}
		if !plainString(b) {
			iter.ReportError("decode NodeNames", "escaped or control characters in a name")
			return
		}
		if err := sink.add(b); err != nil {
			iter.ReportError("decode NodeNames", err.Error())
			return
		}
	}
	if iter.Error != nil {
		return
	}
	*field = &sink.names
}

// errRepeatedNames: more known names than the cache holds nodes, so the
// list repeats names, which kube-scheduler never does.
var errRepeatedNames = errors.New("NodeNames repeats node names: more known names than the extender caches nodes")

// nameSink collects the node names of one call. With a cache, only names
// the cache holds are kept, as the cache's own string (the scheduler sends
// the same names on every call), and the others are only counted: kube-
// scheduler drops every node an answer does not list, so an unknown name
// needs no entry of its own, and a body of a million names the cache does
// not hold costs no memory beyond the body. Without a cache (parseArgs)
// every name is kept.
type nameSink struct {
	cache *nodeCache
	names []string
	rq    *request
	// unknown counts the names not kept when rq is nil.
	unknown int
}

// newNameSink reuses the backing array of *prev when there is one.
func newNameSink(c *nodeCache, prev *[]string, rq *request) *nameSink {
	names := []string{} // never nil: [] is not null
	if prev != nil && *prev != nil {
		names = (*prev)[:0]
	}
	if rq != nil {
		rq.entries, rq.unknown = rq.entries[:0], 0
	}
	return &nameSink{cache: c, names: names, rq: rq}
}

// add takes the name in b (not kept). The caller holds the cache's read
// lock.
func (s *nameSink) add(b []byte) error {
	if s.cache == nil {
		s.names = append(s.names, string(b))
		return nil
	}
	e := s.cache.nodes[string(b)] // no allocation: the compiler looks up b in place
	if e == nil {
		if s.rq != nil {
			s.rq.unknown++
		} else {
			s.unknown++
		}
		return nil
	}
	// Known names are bounded by the cache, unless the body repeats them.
	if len(s.names) >= len(s.cache.nodes) {
		return errRepeatedNames
	}
	s.names = append(s.names, e.name)
	if s.rq != nil {
		s.rq.entries = append(s.rq.entries, e)
	}
	return nil
}

// fallbackArgs is ExtenderArgs for the bodies json-iterator refuses (see
// decodeArgs): encoding/json decides, but NodeNames still go through a
// nameSink, so that such a body cannot make the extender keep a string per
// name either.
type fallbackArgs struct {
	Pod   *corev1.Pod
	Nodes *corev1.NodeList
	// NodeNames is a value, not a pointer: encoding/json would replace a
	// pointer by a new, empty value after a null, and hands a value the
	// null itself.
	NodeNames fallbackNames
}

// jsonKind names the kind of value tok starts as encoding/json's errors do.
func jsonKind(tok json.Token) string {
	switch tok {
	case json.Delim('{'):
		return "object"
	case json.Delim('['):
		return "array"
	}
	switch tok.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	}
	return "number"
}

// fallbackNames is a NodeNames array (or null) that encoding/json found:
// each name is a short-lived string, kept only when the cache holds it.
type fallbackNames struct {
	sink *nameSink
	// present: the last NodeNames of the body is an array, not null.
	present bool
}

func (f *fallbackNames) UnmarshalJSON(raw []byte) error {
	if f.sink.cache != nil {
		f.sink.cache.mu.RLock()
		defer f.sink.cache.mu.RUnlock()
	}
	// A repeated field starts over, as encoding/json's own decoding does.
	f.sink.names = f.sink.names[:0]
	if f.sink.rq != nil {
		f.sink.rq.entries, f.sink.rq.unknown = f.sink.rq.entries[:0], 0
	}
	f.sink.unknown = 0
	if string(raw) == "null" {
		f.present = false
		return nil
	}
	var err error
	if f.sink.cache != nil {
		err = f.lookupEach(raw)
	} else {
		err = f.decodeEach(raw)
	}
	f.present = err == nil
	return err
}

// lookupEach reads the names with json-iterator, one short-lived string
// each. It may decode a broken escape or invalid UTF-8 otherwise than
// encoding/json would, which cannot matter: such a name is not a node name
// and matches nothing in the cache either way.
func (f *fallbackNames) lookupEach(raw []byte) error {
	iter := plainArgsJSON.BorrowIterator(raw)
	defer plainArgsJSON.ReturnIterator(iter)
	// encoding/json has checked the syntax of the whole body already.
	if next := iter.WhatIsNext(); next != jsoniter.ArrayValue {
		return &json.UnmarshalTypeError{Value: iterKind(next), Type: reflect.TypeFor[[]string]()}
	}
	for iter.ReadArray() {
		var name string
		switch next := iter.WhatIsNext(); next {
		case jsoniter.StringValue:
			name = iter.ReadString()
		case jsoniter.NilValue: // null leaves a string empty, as encoding/json does
			iter.ReadNil()
		default:
			return &json.UnmarshalTypeError{Value: iterKind(next), Type: reflect.TypeFor[string]()}
		}
		if iter.Error != nil {
			return iter.Error
		}
		if err := f.sink.add(unsafe.Slice(unsafe.StringData(name), len(name))); err != nil {
			return err
		}
	}
	return iter.Error
}

// decodeEach reads the names with encoding/json's tokenizer: without a
// cache (parseArgs) every name is kept, exactly as encoding/json reads it.
func (f *fallbackNames) decodeEach(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		// encoding/json names the field (see decodeArgs for the struct).
		return &json.UnmarshalTypeError{Value: jsonKind(tok), Type: reflect.TypeFor[[]string]()}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var name string
		switch v := tok.(type) {
		case string:
			name = v
		case nil: // null leaves a string empty, as encoding/json does
		default:
			return &json.UnmarshalTypeError{Value: jsonKind(v), Type: reflect.TypeFor[string]()}
		}
		f.sink.names = append(f.sink.names, name)
	}
	return nil
}

// iterKind names a value kind as encoding/json's errors do.
func iterKind(t jsoniter.ValueType) string {
	switch t {
	case jsoniter.StringValue:
		return "string"
	case jsoniter.BoolValue:
		return "bool"
	case jsoniter.ObjectValue:
		return "object"
	case jsoniter.ArrayValue:
		return "array"
	}
	return "number"
}

// unmarshal is api.Unmarshal with attachment set on the iterator: v is
// decoded and nothing but white space may follow it.
func unmarshal(api jsoniter.API, body []byte, v any, attachment any) bool {
	iter := api.BorrowIterator(body)
	defer api.ReturnIterator(iter)
	iter.Attachment = attachment
	iter.ReadVal(v)
	if iter.Error != nil {
		return false
	}
	iter.WhatIsNext() // sets io.EOF when only white space is left
	return errors.Is(iter.Error, io.EOF)
}

// plainString reports whether b, the raw bytes between two quotes, is the
// string itself: no escape sequence and no control character.
func plainString(b []byte) bool {
	if bytes.IndexByte(b, '\\') >= 0 {
		return false
	}
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}
