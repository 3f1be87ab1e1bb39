package extender

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
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
//   - Encoding: map keys (FailedNodes) are not sorted, and <, > and & are
//     not escaped. kube-scheduler reads the answer into a map, so the order
//     carries nothing, and sorting thousands of keys was most of an answer's
//     cost; the HTML escapes only matter for JSON pasted into HTML.

// argsConfig is json-iterator's encoding/json-compatible configuration.
var argsConfig = jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true}

// answerJSON encodes the answers.
var answerJSON = jsoniter.Config{ValidateJsonRawMessage: true}.Froze()

// plainArgsJSON decodes ExtenderArgs without a cache to intern names from
// (parseArgs, the fuzz target's entry).
var plainArgsJSON = newArgsJSON(nil)

// newArgsJSON returns a decoder of ExtenderArgs whose NodeNames are interned
// from c's node names (none when c is nil). Each server has its own: the
// decoder is bound to its cache.
func newArgsJSON(c *nodeCache) jsoniter.API {
	api := argsConfig.Froze()
	api.RegisterExtension(&nodeNamesExtension{dec: &nodeNamesDecoder{cache: c}})
	return api
}

var argsType = reflect.TypeFor[extenderv1.ExtenderArgs]()

// nodeNamesExtension puts nodeNamesDecoder on ExtenderArgs.NodeNames.
type nodeNamesExtension struct {
	jsoniter.DummyExtension
	dec *nodeNamesDecoder
}

func (e *nodeNamesExtension) UpdateStructDescriptor(sd *jsoniter.StructDescriptor) {
	if sd.Type.Type1() != argsType {
		return
	}
	if b := sd.GetField("NodeNames"); b != nil {
		b.Decoder = e.dec
	}
}

// nodeNamesDecoder decodes a JSON array of strings (or null) into a
// *[]string field. Names are taken in place from the body and looked up in
// the cache; only a name the cache does not know is copied. When the
// iterator's Attachment is a *request, the entry of each name (nil when
// unknown) is appended to its entries, in order. A name with an
// escape sequence or a control character is refused, which sends the whole
// body to encoding/json (see decodeArgs): node names never contain them,
// and encoding/json then decides exactly as kube-scheduler's encoder meant.
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
	names := []string{} // never nil: [] is not null
	if *field != nil && **field != nil {
		names = (**field)[:0]
	}
	rq, _ := iter.Attachment.(*request)
	if rq != nil {
		rq.entries = rq.entries[:0]
	}
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
		name, e := d.lookup(b)
		names = append(names, name)
		if rq != nil {
			rq.entries = append(rq.entries, e)
		}
	}
	if iter.Error != nil {
		return
	}
	*field = &names
}

// lookup returns the name in b and its cache entry: the entry's copy of the
// name, or a new string when the cache has no entry. Caller holds the
// cache's read lock.
func (d *nodeNamesDecoder) lookup(b []byte) (string, *nodeEntry) {
	if d.cache != nil {
		if e := d.cache.nodes[string(b)]; e != nil { // no allocation: the compiler looks up b in place
			return e.name, e
		}
	}
	return string(b), nil
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
